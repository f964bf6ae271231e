// Command goreader reads every file of a manifest through a mount, many
// at once and in three ways, and checks each file's SHA-256. It is the
// "Go program reading the mount" of the reliability suite: the Go runtime
// interrupts its threads with SIGURG (preemption) while they are blocked
// in reads, and those reads must still return the right bytes. Busy
// goroutines and garbage keep preemption signals coming.
//
// Output: one JSON object on stdout. Exit status 1 if any file read wrong.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type file struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

type result struct {
	Reads      int64    `json:"reads"`       // whole-file reads done
	Bytes      int64    `json:"bytes"`       // bytes read
	EINTR      int64    `json:"eintr"`       // raw preads that returned EINTR (and were retried)
	Mismatches int64    `json:"mismatches"`  // files read with the wrong digest
	Errors     []string `json:"errors"`      // failed reads
	SpinRounds int64    `json:"spin_rounds"` // work done by the busy goroutines
}

func main() {
	dir := flag.String("dir", "", "mount directory")
	manifest := flag.String("manifest", "", "JSON list of {name, size, sha256}")
	workers := flag.Int("workers", 16, "concurrent readers")
	rounds := flag.Int("rounds", 3, "times each file is read in each way")
	flag.Parse()
	var files []file
	b, err := os.ReadFile(*manifest)
	if err == nil {
		err = json.Unmarshal(b, &files)
	}
	if err != nil || *dir == "" || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "goreader: need -dir and a non-empty -manifest:", err)
		os.Exit(2)
	}

	var res result
	var mu sync.Mutex
	stop := make(chan struct{})
	var spinners sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		spinners.Go(func() { spin(stop, &res.SpinRounds) })
	}

	type task struct {
		f   file
		how int
	}
	tasks := make(chan task)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for t := range tasks {
				sum, n, err := read(filepath.Join(*dir, t.f.Name), t.f.Size, t.how, rng, &res.EINTR)
				mu.Lock()
				res.Reads++
				res.Bytes += n
				switch {
				case err != nil:
					res.Errors = append(res.Errors, fmt.Sprintf("%s (way %d): %v", t.f.Name, t.how, err))
				case sum != t.f.SHA256:
					res.Mismatches++
					res.Errors = append(res.Errors, fmt.Sprintf("%s (way %d): sha256 %s, want %s", t.f.Name, t.how, sum, t.f.SHA256))
				}
				mu.Unlock()
			}
		})
	}
	for r := range *rounds {
		for how := range 3 {
			for _, f := range files {
				tasks <- task{f, (how + r) % 3}
			}
		}
	}
	close(tasks)
	wg.Wait()
	close(stop)
	spinners.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(&res)
	if res.Mismatches > 0 || len(res.Errors) > 0 {
		os.Exit(1)
	}
}

// spin keeps a goroutine busy (so the runtime preempts it with signals)
// and makes garbage (so the collector stops the world now and then).
func spin(stop <-chan struct{}, rounds *int64) {
	buf := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return
		default:
		}
		h := sha256.New()
		deadline := time.Now().Add(5 * time.Millisecond)
		for time.Now().Before(deadline) {
			h.Write(buf)
		}
		buf = make([]byte, 4096+len(h.Sum(nil)))
		atomic.AddInt64(rounds, 1)
	}
}

// read reads the whole file at path in one of three ways and returns its
// digest and the bytes read.
func read(path string, size int64, how int, rng *rand.Rand, eintr *int64) (string, int64, error) {
	switch how {
	case 0: // os.ReadFile: the Go standard library's own loop
		b, err := os.ReadFile(path)
		return digest(b), int64(len(b)), err
	case 1: // ReadAt in random-sized chunks, in random order
		f, err := os.Open(path)
		if err != nil {
			return "", 0, err
		}
		defer f.Close()
		buf := make([]byte, size)
		var offs []int64
		for off := int64(0); off < size; {
			offs = append(offs, off)
			off += 1 + rng.Int64N(300<<10)
		}
		rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
		for i, off := range offs {
			end := size
			for _, o := range offs {
				if o > off && o < end {
					end = o
				}
			}
			if _, err := f.ReadAt(buf[off:end], off); err != nil && !errors.Is(err, io.EOF) {
				return "", 0, fmt.Errorf("chunk %d at %d: %w", i, off, err)
			}
		}
		return digest(buf), size, nil
	default: // raw pread(2) with O_DIRECT, retrying EINTR by hand and counting it
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			return "", 0, err
		}
		defer syscall.Close(fd)
		buf := make([]byte, size)
		for off := int64(0); off < size; {
			n, err := syscall.Pread(fd, buf[off:min(off+256<<10, size)], off)
			if errors.Is(err, syscall.EINTR) {
				atomic.AddInt64(eintr, 1)
				continue
			}
			if err != nil {
				return "", 0, fmt.Errorf("pread at %d: %w", off, err)
			}
			if n == 0 {
				return "", 0, fmt.Errorf("pread at %d: EOF before %d", off, size)
			}
			off += int64(n)
		}
		return digest(buf), size, nil
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
