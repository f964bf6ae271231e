// Command resreader holds every file of a manifest open through a mount
// and reads them with many readers at once, checking every byte. It is
// the reader of the reliability suite's bounded-resources case (plan 19):
// run as a child process, because a test that reads its own child's FUSE
// mount from its own process can deadlock.
//
// Each file's content is what the suite's randomBytes(seed, size) makes
// (ChaCha8 keyed with the seed), so only the seeds cross over. The files
// marked direct are opened with O_DIRECT, so that every read of them
// reaches the file system; the others are read through the page cache.
//
// Protocol: it opens every file, writes {"opened":N} and a newline on
// stdout, and waits for a line on stdin. Then -readers goroutines start
// together and each makes -reads reads: a random range of a random file,
// or now and then, by a reader of the sequential kind, a whole
// multi-part file front to back. It writes the result, one JSON object
// on a line, and waits for stdin to end before it exits (closing the
// files), so that the reads and the closes can be watched apart. Exit
// status 1 if any read failed or returned other bytes.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

type file struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Seed   uint64 `json:"seed"`
	Direct bool   `json:"direct"`
}

type result struct {
	Opened     int      `json:"opened"`
	Reads      int64    `json:"reads"`       // reads made and checked
	SeqReads   int64    `json:"seq_reads"`   // of them, whole files read front to back
	Bytes      int64    `json:"bytes"`       // bytes read and checked
	DirectRead int64    `json:"direct_read"` // bytes read through O_DIRECT handles
	Mismatches int64    `json:"mismatches"`  // reads that returned other bytes, or too few or too many
	Failed     int64    `json:"failed"`      // reads that returned an error
	MaxInRead  int64    `json:"max_in_read"` // most readers inside a read at once
	Errors     []string `json:"errors"`      // the first few failures
}

const (
	seqChunk    = 128 << 10 // the sequential readers' read size
	keptErrors  = 20
	seqEvery    = 8  // every 8th reader is a sequential one
	seqFraction = 16 // which reads a whole file one time in 16
)

// maxRange is the longest random range (-max-range).
var maxRange int64 = 64 << 10

func main() {
	dir := flag.String("dir", "", "mount directory")
	manifest := flag.String("manifest", "", "JSON list of {name, size, seed, direct}")
	readers := flag.Int("readers", 512, "concurrent readers")
	reads := flag.Int("reads", 64, "reads per reader")
	seed := flag.Uint64("seed", 1, "seed of the readers' choices")
	flag.Int64Var(&maxRange, "max-range", maxRange, "longest random range")
	flag.Parse()
	var files []file
	b, err := os.ReadFile(*manifest)
	if err == nil {
		err = json.Unmarshal(b, &files)
	}
	if err != nil || *dir == "" || len(files) == 0 {
		fail("need -dir and a non-empty -manifest: %v", err)
	}
	if err := raiseNoFile(uint64(len(files)) + 64); err != nil {
		fail("%v", err)
	}

	content := make([][]byte, len(files))
	var large []int // files of more than one random range: the sequential readers' files
	for i, f := range files {
		content[i] = randomBytes(f.Seed, int(f.Size))
		if f.Size > 2*maxRange {
			large = append(large, i)
		}
	}
	handles, err := openAll(*dir, files)
	if err != nil {
		fail("%v", err)
	}
	res := result{Opened: len(handles)}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]int{"opened": len(handles)}); err != nil {
		fail("%v", err)
	}
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		fail("waiting for the go-ahead: %v", err)
	}

	r := &run{files: files, content: content, handles: handles, large: large, res: &res}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range *readers {
		wg.Go(func() { r.reader(w, *reads, *seed, start) })
	}
	close(start)
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(&res)
	_, _ = io.Copy(io.Discard, stdin) // until told to exit
	if res.Mismatches > 0 || res.Failed > 0 {
		os.Exit(1)
	}
}

// run is the readers' shared state.
type run struct {
	files   []file
	content [][]byte
	handles []*os.File
	large   []int // the files the sequential readers read whole
	inRead  atomic.Int64
	mu      sync.Mutex // guards res.Errors; the other counters are atomic
	res     *result
}

// reader is reader w: once start is closed it makes reads reads, each
// of a random range of a random file or, for every seqEvery-th reader
// now and then, of a whole multi-part file, and counts them in r.res.
func (r *run) reader(w, reads int, seed uint64, start <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, uint64(w)))
	buf := make([]byte, max(int(maxRange), seqChunk))
	<-start
	for range reads {
		i := rng.IntN(len(r.files))
		seq := w%seqEvery == 0 && len(r.large) > 0 && rng.IntN(seqFraction) == 0
		if seq {
			i = r.large[rng.IntN(len(r.large))]
		}
		raiseMax(&r.res.MaxInRead, r.inRead.Add(1))
		var n int64
		var err error
		if seq {
			n, err = readWhole(r.handles[i], r.content[i], buf[:seqChunk])
			atomic.AddInt64(&r.res.SeqReads, 1)
		} else {
			off := rng.Int64N(r.files[i].Size + 1) // the end too: a read there returns nothing
			n, err = readRange(r.handles[i], r.content[i], buf[:1+rng.Int64N(maxRange)], off)
		}
		r.inRead.Add(-1)
		r.count(i, n, err)
	}
}

// count adds one read of file i, of n bytes, to the result.
func (r *run) count(i int, n int64, err error) {
	atomic.AddInt64(&r.res.Reads, 1)
	atomic.AddInt64(&r.res.Bytes, n)
	if r.files[i].Direct {
		atomic.AddInt64(&r.res.DirectRead, n)
	}
	if err == nil {
		return
	}
	var mis *mismatch
	if errors.As(err, &mis) {
		atomic.AddInt64(&r.res.Mismatches, 1)
	} else {
		atomic.AddInt64(&r.res.Failed, 1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.res.Errors) < keptErrors {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("%s: %v", r.files[i].Name, err))
	}
}

// raiseMax makes *peak at least v.
func raiseMax(peak *int64, v int64) {
	for {
		old := atomic.LoadInt64(peak)
		if v <= old || atomic.CompareAndSwapInt64(peak, old, v) {
			return
		}
	}
}

// mismatch is a read that returned other bytes than the file's, or a
// count other than what was left before its end.
type mismatch struct{ msg string }

func (m *mismatch) Error() string { return m.msg }

// readRange reads len(buf) bytes at off and checks them against want, the
// whole file: exactly the bytes before the end, and io.EOF only if the
// range passes it. It returns the bytes read.
func readRange(f *os.File, want, buf []byte, off int64) (int64, error) {
	got, err := f.ReadAt(buf, off)
	wantN := int(max(0, min(int64(len(buf)), int64(len(want))-off)))
	if err != nil && !(errors.Is(err, io.EOF) && got == wantN && wantN < len(buf)) {
		return int64(got), fmt.Errorf("pread(off=%d, n=%d) after %d bytes: %w", off, len(buf), got, err)
	}
	if got != wantN {
		return int64(got), &mismatch{fmt.Sprintf("pread(off=%d, n=%d) returned %d bytes, want %d", off, len(buf), got, wantN)}
	}
	if !bytes.Equal(buf[:got], want[off:off+int64(got)]) {
		return int64(got), &mismatch{fmt.Sprintf("pread(off=%d, n=%d) returned other bytes", off, len(buf))}
	}
	return int64(got), nil
}

// readWhole reads the whole file front to back in chunks of len(buf),
// checking each, and then once at its end.
func readWhole(f *os.File, want, buf []byte) (int64, error) {
	var total int64
	for off := int64(0); off <= int64(len(want)); off += int64(len(buf)) {
		n, err := readRange(f, want, buf, off)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// openAll opens every file, 32 at a time, and returns the handles in the
// order of files.
func openAll(dir string, files []file) ([]*os.File, error) {
	handles := make([]*os.File, len(files))
	errs := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				flag := os.O_RDONLY
				if files[i].Direct {
					flag |= syscall.O_DIRECT
				}
				handles[i], errs[i] = os.OpenFile(filepath.Join(dir, filepath.FromSlash(files[i].Name)), flag, 0)
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return handles, nil
}

// raiseNoFile raises the soft limit on open files to the hard one, and
// fails if that is less than need.
func raiseNoFile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Max < need {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d, need %d", lim.Max, need)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	return nil
}

// randomBytes is the reliability suite's randomBytes: n bytes of ChaCha8
// keyed with seed.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rand.NewChaCha8(key).Read(b)
	return b
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "resreader: "+format+"\n", args...)
	os.Exit(2)
}
