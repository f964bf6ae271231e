package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// plainChildArg, as the first argument, makes the bench binary the plain
// client that plainGets starts.
const plainChildArg = "__plain-get"

// plainRequest is what plainGets sends its child on stdin: the spans to
// fetch, conns at a time, in order.
type plainRequest struct {
	Endpoint  string `json:"endpoint"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Bucket    string `json:"bucket"`
	Conns     int    `json:"conns"`
	Spans     []span `json:"spans"`
}

// plainReply is the child's answer: the wall time from its first GET's
// start to its last GET's end, and the bytes it received.
type plainReply struct {
	Nanos int64 `json:"ns"`
	Bytes int64 `json:"bytes"`
}

// plainResult is a plain client's run: its wall time, the bytes, and the
// CPU its process used (user and system, from the kernel's accounting
// of the child, its start-up included).
type plainResult struct {
	Wall  time.Duration
	Bytes int64
	CPU   time.Duration
}

// plainGets fetches spans with conns goroutines of ranged GETs
// (aws-sdk-go-v2, nothing written, no FUSE, no cache) in a process of
// its own, so that its CPU is its own: the bench process also runs the
// shaping proxy. It is the baseline of every fetch-bound case.
func (b *bench) plainGets(ctx context.Context, spans []span, conns int) (plainResult, error) {
	var rep plainReply
	st, err := runChild(ctx, plainChildArg, plainRequest{Endpoint: b.endpoint, AccessKey: b.srv.AccessKey(), SecretKey: b.srv.SecretKey(),
		Bucket: bucket, Conns: conns, Spans: spans}, &rep)
	if err != nil {
		return plainResult{}, fmt.Errorf("plain client: %w", err)
	}
	var want int64
	for _, s := range spans {
		want += s.N
	}
	if rep.Bytes != want {
		return plainResult{}, fmt.Errorf("plain client: got %d bytes, want %d", rep.Bytes, want)
	}
	return plainResult{Wall: time.Duration(rep.Nanos), Bytes: rep.Bytes,
		CPU: st.UserTime() + st.SystemTime()}, nil
}

// plainChild is the child's side.
func plainChild() int {
	var req plainRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "plain client: request:", err)
		return 2
	}
	err := func() error {
		if req.Conns <= 0 || len(req.Spans) == 0 {
			return errors.New("no spans or connections asked for")
		}
		r := newRemote(req.Endpoint, req.AccessKey, req.SecretKey, req.Bucket, req.Conns)
		n, d, err := r.fetch(context.Background(), req.Spans, req.Conns)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(plainReply{Nanos: int64(d), Bytes: n})
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
