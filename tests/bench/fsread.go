package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"syscall"
	"time"
)

// seqRead reads path from start to end in 1 MiB reads, as cat does,
// checking each MiB against want's CRC32C inline (see chunkSums), and
// fails unless it has want's bytes.
func seqRead(ctx context.Context, path string, want *chunkSums) (int64, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	c := newSumChecker(want)
	buf := make([]byte, 1<<20)
	var n int64
	start := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return n, time.Since(start), fmt.Errorf("read %s: %w", path, err)
		}
		k, err := f.Read(buf)
		c.add(buf[:k])
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, time.Since(start), fmt.Errorf("read %s at %d: %w", path, n, err)
		}
	}
	elapsed := time.Since(start)
	if err := c.done(); err != nil {
		return n, elapsed, fmt.Errorf("read %s: %w", path, err)
	}
	return n, elapsed, nil
}

// pairedSeqRead is seqRead of path and of local at once, 1 MiB of one
// then the same 1 MiB of the other, taking turns at going first, so that
// both see the same moments of the disk and the machine. It returns the
// time each spent in its own reads; both are checked against want.
func pairedSeqRead(ctx context.Context, path, local string, want *chunkSums) (d, localD time.Duration, err error) {
	type stream struct {
		f    *os.File
		c    *sumChecker
		n    int64
		took time.Duration
		eof  bool
	}
	var ss [2]*stream
	for i, p := range []string{path, local} {
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		ss[i] = &stream{f: f, c: newSumChecker(want)}
	}
	buf := make([]byte, 1<<20)
	for i := 0; !ss[0].eof || !ss[1].eof; i++ {
		if err := ctx.Err(); err != nil {
			return ss[0].took, ss[1].took, fmt.Errorf("read %s: %w", path, err)
		}
		for k := range 2 {
			st := ss[(i+k)%2]
			if st.eof {
				continue
			}
			start := time.Now()
			n, err := io.ReadFull(st.f, buf)
			st.took += time.Since(start)
			st.c.add(buf[:n])
			st.n += int64(n)
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				st.eof = true
			case err != nil:
				return ss[0].took, ss[1].took, fmt.Errorf("read %s at %d: %w", st.f.Name(), st.n, err)
			}
		}
	}
	for _, st := range ss {
		if err := st.c.done(); err != nil {
			return ss[0].took, ss[1].took, fmt.Errorf("read %s: %w", st.f.Name(), err)
		}
	}
	return ss[0].took, ss[1].took, nil
}

// randomOffsets returns n offsets in [0, size-readSize], drawn from seed.
func randomOffsets(seed int64, n int, size int64, readSize int) []int64 {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xbe4c4))
	span := size - int64(readSize) + 1
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = rng.Int64N(max(span, 1))
	}
	return offs
}

// expectedAt reads readSize bytes at each offset of the local file path.
func expectedAt(path string, offsets []int64, readSize int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([][]byte, len(offsets))
	for i, off := range offsets {
		out[i] = make([]byte, readSize)
		if _, err := f.ReadAt(out[i], off); err != nil {
			return nil, fmt.Errorf("read %s at %d: %w", path, off, err)
		}
	}
	return out, nil
}

// randomReads opens path once, as a searcher keeps a segment open, and
// preads readSize bytes at each offset, one after another, checking each
// against want. It returns each pread's latency and how many of them
// finished before busy was closed (all of them if busy is nil).
func randomReads(ctx context.Context, path string, offsets []int64, readSize int, want [][]byte, busy <-chan struct{}) ([]time.Duration, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	buf := make([]byte, readSize)
	lat := make([]time.Duration, 0, len(offsets))
	during := 0
	for i, off := range offsets {
		if err := ctx.Err(); err != nil {
			return lat, during, fmt.Errorf("preads of %s: %w", path, err)
		}
		start := time.Now()
		_, err := f.ReadAt(buf, off)
		lat = append(lat, time.Since(start))
		if err != nil {
			return lat, during, fmt.Errorf("pread %s at %d: %w", path, off, err)
		}
		if !bytes.Equal(buf, want[i]) {
			return lat, during, fmt.Errorf("pread %s at %d: other bytes than the generated file's", path, off)
		}
		if busy == nil || !closed(busy) {
			during++
		}
	}
	return lat, during, nil
}

// mmapReads is randomReads through a shared read-only mapping of path, as
// a search engine that maps its files reads them: each read copies
// readSize bytes out of the mapping. The first touch of a page that is
// not in the page cache faults, and the kernel reads around it (the
// mount's readahead; the mapping does not ask for MADV_RANDOM, as a
// mapping made without madvise does not). A failed read of the file is a
// SIGBUS in the reader, returned here as an error.
func mmapReads(ctx context.Context, path string, offsets []int64, readSize int, want [][]byte) (lat []time.Duration, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	defer syscall.Munmap(m)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	at := int64(-1)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read of mapped %s at %d faulted: %v", path, at, r)
		}
	}()
	buf := make([]byte, readSize)
	lat = make([]time.Duration, 0, len(offsets))
	for i, off := range offsets {
		if err := ctx.Err(); err != nil {
			return lat, fmt.Errorf("mapped reads of %s: %w", path, err)
		}
		at = off
		start := time.Now()
		copy(buf, m[off:off+int64(readSize)])
		lat = append(lat, time.Since(start))
		if !bytes.Equal(buf, want[i]) {
			return lat, fmt.Errorf("mapped read of %s at %d: other bytes than the generated file's", path, off)
		}
	}
	return lat, nil
}

// pairedReads is randomReads of path with a pread of the same offset of
// local beside each one, taking turns at going first, so that both see
// the same moments of the disk and the machine. It returns the two
// latency lists; every read is checked against want.
func pairedReads(ctx context.Context, path, local string, offsets []int64, readSize int, want [][]byte) (lat, localLat []time.Duration, err error) {
	files := make([]*os.File, 2)
	for i, p := range []string{path, local} {
		if files[i], err = os.Open(p); err != nil {
			return nil, nil, err
		}
		defer files[i].Close()
	}
	buf := make([]byte, readSize)
	lats := [2][]time.Duration{make([]time.Duration, 0, len(offsets)), make([]time.Duration, 0, len(offsets))}
	for i, off := range offsets {
		if err := ctx.Err(); err != nil {
			return lats[0], lats[1], fmt.Errorf("preads of %s: %w", path, err)
		}
		for k := range 2 {
			j := (i + k) % 2 // even offsets: path first; odd: local first
			start := time.Now()
			_, err := files[j].ReadAt(buf, off)
			lats[j] = append(lats[j], time.Since(start))
			if err != nil {
				return lats[0], lats[1], fmt.Errorf("pread %s at %d: %w", files[j].Name(), off, err)
			}
			if !bytes.Equal(buf, want[i]) {
				return lats[0], lats[1], fmt.Errorf("pread %s at %d: other bytes than the generated file's", files[j].Name(), off)
			}
		}
	}
	return lats[0], lats[1], nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// copyProc is `cp -r SRC DST` running as its own process, as a recovery
// copies a shard directory.
type copyProc struct {
	cmd   *exec.Cmd
	start time.Time
	done  chan struct{} // closed once cmd.Wait has returned
	end   time.Time     // written before done is closed
	err   error         // written before done is closed
}

// startCopy starts cp in its own process group (a terminal's Ctrl-C reaches
// only the bench, which then stops it) with a parent-death signal; ctx
// ending kills it.
func startCopy(ctx context.Context, src, dst string) (*copyProc, error) {
	cmd := exec.CommandContext(ctx, "cp", "-r", src, dst)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c := &copyProc{cmd: cmd, done: make(chan struct{})}
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cp -r %s %s: %w", src, dst, err)
	}
	go func() {
		defer close(c.done)
		err := cmd.Wait()
		c.end = time.Now()
		if err != nil {
			c.err = fmt.Errorf("cp -r %s %s: %w: %s", src, dst, err, bytes.TrimSpace(out.Bytes()))
		}
	}()
	return c, nil
}

// wait waits for cp to exit and returns how long it ran.
func (c *copyProc) wait() (time.Duration, error) {
	<-c.done
	return c.end.Sub(c.start), c.err
}
