package prefetch

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/leakcheck"
)

func TestEveryTaskRunsOnceWithinTheBound(t *testing.T) {
	s := New(Config{Workers: 4, Reserved: 1})
	defer s.Close()
	var running, peak, ran atomic.Int64
	var wg sync.WaitGroup
	const n = 500
	for i := range n {
		wg.Add(1)
		s.Submit(fmt.Sprint("f", i%7), Priority(i%3), func(ctx context.Context) {
			defer wg.Done()
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			runtime.Gosched()
			running.Add(-1)
			ran.Add(1)
		})
	}
	wg.Wait()
	if ran.Load() != n {
		t.Fatalf("%d tasks ran, want %d", ran.Load(), n)
	}
	if peak.Load() > 4 {
		t.Fatalf("peak %d tasks running, bound 4", peak.Load())
	}
}

// gate holds tasks until released and records the order tasks started.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	order   []string
	started chan string
}

func newGate() *gate {
	return &gate{release: make(chan struct{}), started: make(chan string, 1000)}
}

func (g *gate) task(name string, block bool) func(context.Context) {
	return func(ctx context.Context) {
		g.mu.Lock()
		g.order = append(g.order, name)
		g.mu.Unlock()
		g.started <- name
		if block {
			select {
			case <-g.release:
			case <-ctx.Done():
			}
		}
	}
}

func (g *gate) wait(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case name := <-g.started:
			got = append(got, name)
		case <-time.After(30 * time.Second): // hang guard only
			t.Fatalf("only %d of %d tasks started: %v", len(got), n, got)
		}
	}
	return got
}

func TestDemandDoesNotQueueBehindBackground(t *testing.T) {
	s := New(Config{Workers: 4, Reserved: 1})
	defer s.Close()
	g := newGate()
	for i := range 10 {
		s.Submit("big", Background, g.task(fmt.Sprint("bg", i), true))
	}
	// Background may use at most 3 workers: the fourth is kept for demand.
	g.wait(t, 3)
	st := s.Stats()
	if st.Running[Background] != 3 || st.Queued[Background] != 7 {
		t.Fatalf("running %v queued %v; want 3 background running, 7 queued", st.Running, st.Queued)
	}
	s.Submit("small", Demand, g.task("demand", false))
	if got := g.wait(t, 1); got[0] != "demand" {
		t.Fatalf("started %v, want the demand task", got)
	}
	// It started while every background task was still blocked.
	if c := s.Stats().Completed[Background]; c != 0 {
		t.Fatalf("%d background tasks completed before demand started", c)
	}
	close(g.release)
}

func TestDemandWaitsForAtMostOneFetchWhenSaturated(t *testing.T) {
	s := New(Config{Workers: 2, Reserved: 1})
	defer s.Close()
	g := newGate()
	// Fill both workers: one background, one demand that blocks.
	s.Submit("a", Background, g.task("bg0", true))
	s.Submit("a", Background, g.task("bg1", true))
	s.Submit("b", Demand, g.task("d0", true))
	g.wait(t, 2)
	s.Submit("c", Demand, g.task("d1", false))
	// Release one running task: the next to start must be the demand task,
	// not the queued background one.
	g.release <- struct{}{}
	if got := g.wait(t, 1); got[0] != "d1" {
		t.Fatalf("after one fetch ended, %v started; want d1", got)
	}
	close(g.release)
	g.wait(t, 1) // bg1
}

func TestRoundRobinAcrossGroups(t *testing.T) {
	s := New(Config{Workers: 1})
	defer s.Close()
	g := newGate()
	s.Submit("first", Background, g.task("hold", true))
	g.wait(t, 1)
	for i := range 50 {
		s.Submit("big", Background, g.task(fmt.Sprint("big", i), false))
	}
	s.Submit("small", Background, g.task("small0", false))
	s.Submit("small", Background, g.task("small1", false))
	close(g.release)
	order := g.wait(t, 52)
	pos := map[string]int{}
	for i, name := range order {
		pos[name] = i
	}
	// Alternating turns: the small file's two tasks run among the first
	// four, not after fifty tasks of the big one.
	if pos["small0"] > 3 || pos["small1"] > 3 {
		t.Fatalf("small file starved: order %v", order[:6])
	}
}

func TestRaiseAndCancel(t *testing.T) {
	s := New(Config{Workers: 1})
	defer s.Close()
	g := newGate()
	s.Submit("x", Background, g.task("hold", true))
	g.wait(t, 1)
	var tasks []*Task
	for i := range 5 {
		tasks = append(tasks, s.Submit("x", Background, g.task(fmt.Sprint("bg", i), false)))
	}
	s.Raise(tasks[3], Demand)
	if !s.Cancel(tasks[1]) {
		t.Fatal("Cancel of a queued task returned false")
	}
	close(g.release)
	order := g.wait(t, 4)
	want := []string{"bg3", "bg0", "bg2", "bg4"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if s.Cancel(tasks[0]) {
		t.Fatal("Cancel of a finished task returned true")
	}
	st := s.Stats()
	if st.Raised != 1 || st.Cancelled != 1 {
		t.Fatalf("raised %d cancelled %d, want 1 and 1", st.Raised, st.Cancelled)
	}
}

// A reader that waits on a running readahead fetch makes it demand work:
// the readahead slot it held goes to the next readahead task, and the
// accounting follows it to the end.
func TestRaiseOfARunningTaskFreesItsSlot(t *testing.T) {
	s := New(Config{Workers: 4, Reserved: 1})
	defer s.Close()
	g := newGate()
	var tasks []*Task
	for i := range 4 {
		tasks = append(tasks, s.Submit("f", Readahead, g.task(fmt.Sprint("ra", i), true)))
	}
	// Readahead may use all workers but one.
	g.wait(t, 3)
	if st := s.Stats(); st.Running[Readahead] != 3 || st.Queued[Readahead] != 1 {
		t.Fatalf("running %v queued %v; want 3 readahead running, 1 queued", st.Running, st.Queued)
	}
	s.Raise(tasks[0], Demand)
	if got := g.wait(t, 1); got[0] != "ra3" {
		t.Fatalf("after the raise %v started; want ra3", got)
	}
	st := s.Stats()
	if st.Running[Demand] != 1 || st.Running[Readahead] != 3 || st.Raised != 1 {
		t.Fatalf("running %v raised %d; want 1 demand and 3 readahead running, 1 raise", st.Running, st.Raised)
	}
	s.Raise(tasks[0], Readahead) // never lowers
	close(g.release)
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for s.Stats().Completed[Demand]+s.Stats().Completed[Readahead] < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st = s.Stats()
	if st.Completed[Demand] != 1 || st.Completed[Readahead] != 3 || st.Running != [numPriorities]int{} {
		t.Fatalf("completed %v running %v; want 1 demand, 3 readahead, none running", st.Completed, st.Running)
	}
}

func TestCloseRunsQueuedTasksCancelledAndStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	s := New(Config{Workers: 3})
	g := newGate()
	var cancelled atomic.Int64
	for i := range 20 {
		s.Submit("x", Background, func(ctx context.Context) {
			g.task(fmt.Sprint(i), true)(ctx)
			if ctx.Err() != nil {
				cancelled.Add(1)
			}
		})
	}
	g.wait(t, 2) // Workers - Reserved background tasks run
	s.Close()
	if n := cancelled.Load(); n != 20 {
		t.Fatalf("%d tasks saw a cancelled context, want all 20 to run cancelled", n)
	}
	ran := false
	s.Submit("x", Demand, func(ctx context.Context) { ran = ctx.Err() != nil })
	if !ran {
		t.Fatal("a task submitted after Close did not run with a cancelled context")
	}
	leakcheck.Settle(t, before, 30*time.Second)
}

func TestReadaheadLeavesOneWorkerForDemand(t *testing.T) {
	s := New(Config{Workers: 4, Reserved: 2})
	defer s.Close()
	g := newGate()
	for i := range 6 {
		s.Submit("seq", Readahead, g.task(fmt.Sprint("ra", i), true))
	}
	g.wait(t, 3)
	if st := s.Stats(); st.Running[Readahead] != 3 || st.Queued[Readahead] != 3 {
		t.Fatalf("running %v queued %v; want 3 readahead running (one worker left), 3 queued", st.Running, st.Queued)
	}
	// Background may not start while readahead holds more than
	// Workers-Reserved workers.
	s.Submit("bg", Background, g.task("bg", true))
	s.Submit("rnd", Demand, g.task("demand", false))
	if got := g.wait(t, 1); got[0] != "demand" {
		t.Fatalf("started %v, want the demand task on the last worker", got)
	}
	if st := s.Stats(); st.Running[Background] != 0 {
		t.Fatalf("background running beside 3 readahead fetches: %v", st.Running)
	}
	close(g.release)
}

// TestSpareIsWhatStartsAtOnce checks Spare against the scheduler itself:
// as many tasks as it reports start at once, and one more waits.
func TestSpareIsWhatStartsAtOnce(t *testing.T) {
	s := New(Config{Workers: 4, Reserved: 1})
	g := newGate()
	want := map[Priority]int{Demand: 4, Readahead: 3, Background: 3}
	for p, n := range want {
		if got := s.Spare(p); got != n {
			t.Errorf("idle: Spare(%v) = %d, want %d", p, got, n)
		}
	}
	// Two background tasks hold two workers.
	s.Submit("a", Background, g.task("bg0", true))
	s.Submit("a", Background, g.task("bg1", true))
	g.wait(t, 2)
	want = map[Priority]int{Demand: 2, Readahead: 1, Background: 1}
	for p, n := range want {
		if got := s.Spare(p); got != n {
			t.Errorf("two running: Spare(%v) = %d, want %d", p, got, n)
		}
	}
	// The one spare background worker: a task takes it, the next waits.
	s.Submit("b", Background, g.task("bg2", true))
	g.wait(t, 1)
	if got := s.Spare(Background); got != 0 {
		t.Errorf("three running: Spare(background) = %d, want 0", got)
	}
	s.Submit("b", Background, g.task("bg3", true))
	if got := s.Spare(Demand); got != 1 {
		t.Errorf("three running, a background task queued: Spare(demand) = %d, want 1 (the queued task cannot take the last worker)", got)
	}
	if got := s.Spare(Readahead); got != 0 {
		t.Errorf("Spare(readahead) = %d, want 0: readahead leaves the last worker to demand", got)
	}
	st := s.Stats()
	if st.Running[Background] != 3 || st.Queued[Background] != 1 {
		t.Fatalf("running %v queued %v; want 3 background running, 1 queued", st.Running, st.Queued)
	}
	close(g.release)
	s.Close()
	if got := s.Spare(Demand); got != 0 {
		t.Errorf("closed: Spare(demand) = %d, want 0", got)
	}
}

// Every task that runs is counted once in the queue-wait histogram of
// the priority it ran at; one held in the queue behind a busy worker
// waits at least as long as it was held.
func TestQueueWaitIsObservedByPriority(t *testing.T) {
	s := New(Config{Workers: 1})
	defer s.Close()
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	s.Submit("a", Demand, func(context.Context) { defer wg.Done(); close(started); <-release })
	<-started
	s.Submit("b", Background, func(context.Context) { wg.Done() })
	s.Submit("c", Readahead, func(context.Context) { wg.Done() })
	const held = 20 * time.Millisecond
	time.Sleep(held)
	close(release)
	wg.Wait()
	h := s.Histograms()
	for p, want := range map[Priority]uint64{Background: 1, Readahead: 1, Demand: 1} {
		if got := h.QueueWait[p].Snapshot().Count; got != want {
			t.Errorf("%s: %d observations, want %d", p, got, want)
		}
	}
	if got := h.QueueWait[Background].Snapshot().Sum; got < held {
		t.Errorf("background task waited %v in the histogram, held %v", got, held)
	}
}

// Background tasks with a cost start no faster than the rate pays for
// them, whatever the pool's size; a demand task never waits for the
// cap, and a background task raised to readahead leaves it at once.
func TestBackgroundRateHoldsCostedTasks(t *testing.T) {
	const rate = 1 << 20 // bytes per second
	const cost = 64 << 10
	s := New(Config{Workers: 8, BackgroundRate: rate})
	defer s.Close()
	start := time.Now()
	var mu sync.Mutex
	var starts []time.Duration
	var wg sync.WaitGroup
	const n = 6
	for range n {
		wg.Add(1)
		s.SubmitCost("bulk", Background, cost, func(context.Context) {
			mu.Lock()
			starts = append(starts, time.Since(start))
			mu.Unlock()
			wg.Done()
		})
	}
	// A demand task submitted behind them runs while they wait.
	demand := make(chan time.Duration, 1)
	s.SubmitCost("hot", Demand, 8<<20, func(context.Context) { demand <- time.Since(start) })
	d := <-demand
	wg.Wait()
	// Each background task starts only once its bytes and those before
	// it are paid for: the k-th (from 1) at k × cost / rate at the
	// earliest. That is a lower bound the limiter guarantees, not a
	// timing a loaded machine could miss.
	per := costOf(cost, rate)
	for k, at := range starts {
		if min := time.Duration(k+1) * per; at < min {
			t.Errorf("background task %d started at %v, before its bytes were paid for at %v", k+1, at, min)
		}
	}
	if last := starts[n-1]; d >= last {
		t.Errorf("the demand task ran at %v, after the last capped background task (%v)", d, last)
	}
	if s.Stats().Throttled <= 0 {
		t.Error("no throttled time counted")
	}

	// Raised out of the background queue, a task no longer waits.
	s2 := New(Config{Workers: 2, BackgroundRate: 1}) // a byte a second: the first costed task waits ~forever
	defer s2.Close()
	ran := make(chan struct{})
	task := s2.SubmitCost("bulk", Background, 1<<20, func(context.Context) { close(ran) })
	time.Sleep(10 * time.Millisecond) // let a worker look at it and arm the gate
	select {
	case <-ran:
		t.Fatal("a task costing a day at the rate ran at once")
	default:
	}
	s2.Raise(task, Readahead)
	<-ran
}
