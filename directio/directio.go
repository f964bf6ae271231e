// Package directio holds what segfs's O_DIRECT writers and readers
// share (the part cache's, and a restore's): the alignment the kernel
// needs of an O_DIRECT transfer's offset, length and buffer address, and
// buffers that meet it. Each caller keeps its own way of falling back to
// the page cache where a file system refuses O_DIRECT (EINVAL).
package directio

import "unsafe"

// Align is the alignment of an O_DIRECT transfer's offset, length and
// buffer address on the file systems segfs writes to (their logical
// block size is at most 4096 bytes).
const Align = 4096

// Prefix returns how many bytes of data, transferred at off, can go
// with O_DIRECT: its whole Align-byte blocks when off and data's address
// are aligned, else none.
func Prefix(data []byte, off int64) int {
	n := len(data) &^ (Align - 1)
	if n == 0 || off%Align != 0 || uintptr(unsafe.Pointer(&data[0]))%Align != 0 {
		return 0
	}
	return n
}

// Buf returns a zeroed buffer of n bytes at an Align-aligned address.
func Buf(n int64) []byte {
	b := make([]byte, n+Align)
	skip := (Align - int(uintptr(unsafe.Pointer(&b[0]))%Align)) % Align
	return b[skip : int64(skip)+n : int64(skip)+n]
}
