package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// mmapChildArg, as the first argument, makes the bench binary the child
// that mmapReadsChild starts.
const mmapChildArg = "__mmap-reads"

// mmapRequest is what mmapReadsChild sends its child on stdin.
type mmapRequest struct {
	Path     string  `json:"path"`  // the file to map
	Local    string  `json:"local"` // the generated copy to check against
	Offsets  []int64 `json:"offsets"`
	ReadSize int     `json:"read_size"`
}

// mmapReadsChild runs mmapReads in a child process and returns its
// latencies. It must not run in this process: the bench process also
// runs the shaping proxy that the mount's fetches go through, and a
// thread blocked in a page fault of a FUSE mapping cannot reach the Go
// runtime's safe points, so the next stop-the-world (a GC) would stop
// the proxy until the fault is served, and the fault waits on the proxy.
// The child checks the bytes against local itself.
func mmapReadsChild(ctx context.Context, path, local string, offsets []int64, readSize int) ([]time.Duration, error) {
	var ns []int64
	if _, err := runChild(ctx, mmapChildArg, mmapRequest{Path: path, Local: local, Offsets: offsets, ReadSize: readSize}, &ns); err != nil {
		return nil, fmt.Errorf("mapped reads of %s: %w", path, err)
	}
	if len(ns) != len(offsets) {
		return nil, fmt.Errorf("mapped reads of %s: %d latencies for %d offsets", path, len(ns), len(offsets))
	}
	lat := make([]time.Duration, len(ns))
	for i, n := range ns {
		lat[i] = time.Duration(n)
	}
	return lat, nil
}

// runChild runs the bench binary as the child named by arg, with req as
// JSON on its standard input, and decodes what it prints into reply. It
// returns the child's process state, for its rusage.
func runChild(ctx context.Context, arg string, req, reply any) (*os.ProcessState, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, arg)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out.Bytes(), reply); err != nil {
		return nil, fmt.Errorf("child said %q: %w", out.String(), err)
	}
	return cmd.ProcessState, nil
}

// mmapChild is the child's side: it reads an mmapRequest on stdin, runs
// mmapReads and writes the latencies in nanoseconds as a JSON array.
func mmapChild() int {
	var req mmapRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "mapped reads: request:", err)
		return 2
	}
	err := func() error {
		if len(req.Offsets) == 0 || req.ReadSize <= 0 {
			return errors.New("no reads asked for")
		}
		want, err := expectedAt(req.Local, req.Offsets, req.ReadSize)
		if err != nil {
			return err
		}
		lat, err := mmapReads(context.Background(), req.Path, req.Offsets, req.ReadSize, want)
		if err != nil {
			return err
		}
		ns := make([]int64, len(lat))
		for i, d := range lat {
			ns[i] = int64(d)
		}
		return json.NewEncoder(os.Stdout).Encode(ns)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
