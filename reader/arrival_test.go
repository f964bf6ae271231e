package reader

import (
	"context"
	"testing"
	"time"
)

// An arrival gives out a prefix only once every byte of it is in; after
// a failure nothing; after a success everything; and a fetch that never
// started nothing once its call is done.
func TestArrivalPrefix(t *testing.T) {
	var a arrival
	ctx := context.Background()
	done := make(chan struct{})
	a.start(make([]byte, 100))
	a.filled(30)
	if got, err := a.take(ctx, 30, done); err != nil || got.waited || !got.early || len(got.data) != 30 {
		t.Fatalf("take 30 of a prefix of 30: %d bytes, waited %v, early %v, %v", len(got.data), got.waited, got.early, err)
	}
	got := make(chan taken, 1)
	go func() {
		t, _ := a.take(ctx, 90, done)
		got <- t
	}()
	a.filled(60)
	select {
	case tk := <-got:
		t.Fatalf("take 90 returned %d bytes with 60 in", len(tk.data))
	case <-time.After(20 * time.Millisecond): // it may not return at all yet
	}
	a.filled(90)
	if tk := <-got; len(tk.data) != 90 || !tk.waited {
		t.Fatalf("take 90 once in: %d bytes, waited %v; want 90, true", len(tk.data), tk.waited)
	}
	a.end(false)
	if tk, _ := a.take(ctx, 10, done); tk.data != nil {
		t.Error("a failed fetch's bytes were taken after its end")
	}

	var c arrival
	c.start(make([]byte, 10))
	c.end(true)
	if tk, _ := c.take(ctx, 10, done); len(tk.data) != 10 || tk.early {
		t.Errorf("an ended fetch's bytes: %d, early %v; want 10, not early", len(tk.data), tk.early)
	}
	if tk, _ := c.take(ctx, 11, done); tk.data != nil {
		t.Error("bytes past the buffer given out")
	}
	var never arrival // a fetch that never ran: its call's done closes
	close(done)
	if tk, err := never.take(ctx, 10, done); tk.data != nil || err != nil {
		t.Errorf("take of a fetch that never started: %d bytes, %v", len(tk.data), err)
	}
}
