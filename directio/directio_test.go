package directio

import (
	"testing"
	"unsafe"
)

func TestPrefix(t *testing.T) {
	buf := Buf(3*Align + 100)
	if p := &buf[0]; uintptr(unsafe.Pointer(p))%Align != 0 {
		t.Fatal("Buf is not aligned")
	}
	for _, tc := range []struct {
		name string
		data []byte
		off  int64
		want int
	}{
		{"whole blocks and a tail", buf, 0, 3 * Align},
		{"an aligned offset", buf, 2 * Align, 3 * Align},
		{"an offset within a block", buf, 100, 0},
		{"a buffer off its alignment", buf[1:], 0, 0},
		{"less than a block", buf[:Align-1], 0, 0},
		{"exactly a block", buf[:Align], 0, Align},
		{"nothing", buf[:0], 0, 0},
	} {
		if got := Prefix(tc.data, tc.off); got != tc.want {
			t.Errorf("%s: Prefix = %d, want %d", tc.name, got, tc.want)
		}
	}
}
