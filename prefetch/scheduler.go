package prefetch

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/segfs/segfs/stats"
)

// Priority orders tasks. Higher runs first.
type Priority int

// The priorities, lowest first.
const (
	Background Priority = iota
	Readahead
	Demand
	numPriorities
)

func (p Priority) String() string {
	switch p {
	case Background:
		return "background"
	case Readahead:
		return "readahead"
	case Demand:
		return "demand"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Config configures a Scheduler.
type Config struct {
	// Workers is the fixed number of goroutines that run tasks, and so
	// the bound on fetches in flight. Default 16.
	Workers int
	// BackgroundRate, if positive, caps the bytes per second of
	// Background tasks that declare a cost (SubmitCost): one starts only
	// once the bytes of those before it and its own are paid for at this
	// rate (background.go). Readahead and Demand tasks, and a task raised
	// to them, never wait for it. 0: no cap.
	BackgroundRate int64
	// Reserved is how many of the workers background tasks leave to
	// Demand and Readahead tasks. Default Workers/4, at least 1 when
	// Workers > 1; always less than Workers. Readahead leaves one worker
	// to Demand.
	Reserved int
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.Reserved <= 0 {
		c.Reserved = c.Workers / 4
		if c.Reserved == 0 && c.Workers > 1 {
			c.Reserved = 1
		}
	}
	if c.Reserved >= c.Workers {
		c.Reserved = c.Workers - 1
	}
	return c
}

// Task is a submitted unit of work.
type Task struct {
	group  string
	run    func(ctx context.Context)
	queued time.Time // when it was submitted
	cost   int64     // bytes it will fetch, for Config.BackgroundRate; 0: free

	// Guarded by the scheduler's mu.
	prio   Priority
	state  taskState
	elem   *list.Element // in its group's queue while queued
	ready  time.Time     // at the head of the gated queue: when its bytes are paid for
	looked time.Time     // when the gate first gave it its time
}

type taskState int

const (
	queued taskState = iota
	running
	done
	cancelled
)

// Scheduler runs tasks on a fixed pool of workers. Its methods may be
// called concurrently.
type Scheduler struct {
	// Immutable after New.
	cfg    Config
	ctx    context.Context // cancelled by Close; passed to every task
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Guarded by mu.
	mu         sync.Mutex
	cond       *sync.Cond // signalled when a task is queued or a worker frees up
	closed     bool
	queues     [numPriorities]fairQueue
	running    [numPriorities]int
	submitted  [numPriorities]int64
	completed  [numPriorities]int64
	raised     int64
	cancelledN int64

	hist Histograms // atomic

	gate bgGate // guarded by mu (background.go)
}

// Histograms are the scheduler's distributions, served at /metrics.
type Histograms struct {
	// QueueWait is the time from a task's submission to a worker's
	// taking it, by the priority it ran at (a raised task counts at its
	// new priority).
	QueueWait [numPriorities]stats.Histogram `stat:"fetch_queue_wait_seconds" label:"priority=background,readahead,demand"`
}

// Histograms returns the scheduler's live histograms.
func (s *Scheduler) Histograms() *Histograms { return &s.hist }

// New starts a Scheduler with cfg.Workers goroutines.
func New(cfg Config) *Scheduler {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Scheduler{cfg: cfg, ctx: ctx, cancel: cancel}
	s.cond = sync.NewCond(&s.mu)
	for p := range s.queues {
		s.queues[p].init()
	}
	s.wg.Add(cfg.Workers)
	for range cfg.Workers {
		go s.worker()
	}
	return s
}

// Workers returns the size of the pool.
func (s *Scheduler) Workers() int { return s.cfg.Workers }

// Submit queues run at prio in group (usually one group per file). run
// receives the scheduler's context, which is cancelled by Close; it must
// return promptly once that context is done. After Close, run is called at
// once on the caller's goroutine with the cancelled context.
func (s *Scheduler) Submit(group string, prio Priority, run func(ctx context.Context)) *Task {
	return s.SubmitCost(group, prio, 0, run)
}

// SubmitCost is Submit for a task that will fetch about cost bytes:
// at Background priority it waits for Config.BackgroundRate.
func (s *Scheduler) SubmitCost(group string, prio Priority, cost int64, run func(ctx context.Context)) *Task {
	t := &Task{group: group, run: run, prio: prio, queued: time.Now(), cost: cost}
	s.mu.Lock()
	if s.closed {
		t.state = running
		s.mu.Unlock()
		run(s.ctx)
		return t
	}
	s.submitted[prio]++
	s.queues[prio].push(t)
	s.mu.Unlock()
	s.cond.Signal()
	return t
}

// Raise moves a task up to prio. A queued task moves to prio's queue. A
// running task is counted at prio from now on: a reader that waits on a
// running readahead or background fetch makes it demand work, and the
// slot it held among the non-demand workers is free for the next
// readahead, so a sequential reader that waits on one part at a time
// keeps every worker busy. Raise does nothing if the task has ended or already has prio or a
// higher one.
func (s *Scheduler) Raise(t *Task, prio Priority) {
	s.mu.Lock()
	if t.prio >= prio || (t.state != queued && t.state != running) {
		s.mu.Unlock()
		return
	}
	if t.state == queued {
		s.queues[t.prio].remove(t)
		s.queues[prio].push(t)
		s.gate.release(t, s.cfg.BackgroundRate) // no longer held to the cap
	} else {
		s.running[t.prio]--
		s.running[prio]++
	}
	t.prio = prio
	s.raised++
	s.mu.Unlock()
	// More than one worker may now be able to take a task.
	s.cond.Broadcast()
}

// Cancel removes a task that has not started yet and reports whether it
// did; a cancelled task never runs.
func (s *Scheduler) Cancel(t *Task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.state != queued {
		return false
	}
	s.queues[t.prio].remove(t)
	s.gate.release(t, s.cfg.BackgroundRate)
	t.state = cancelled
	s.cancelledN++
	return true
}

// worker runs tasks until the scheduler is closed and its queues are
// drained.
func (s *Scheduler) worker() {
	defer s.wg.Done()
	s.mu.Lock()
	for {
		t := s.pickLocked()
		if t == nil {
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.cond.Wait()
			continue
		}
		t.state = running
		s.running[t.prio]++
		prio := t.prio
		s.mu.Unlock()
		s.hist.QueueWait[prio].Since(t.queued)

		t.run(s.ctx)

		s.mu.Lock()
		t.state = done
		s.running[t.prio]--
		s.completed[t.prio]++
		// A slot that non-demand work may use has freed up.
		s.cond.Signal()
	}
}

// pickLocked dequeues the next task this worker may run, or nil. Demand
// tasks may use any worker. Readahead, which a reader will wait on soon,
// may use all but one, so a demand task never waits for more than one
// fetch to end; background work leaves cfg.Reserved workers free. After
// Close every queued task is handed out, to run cancelled.
func (s *Scheduler) pickLocked() *Task {
	if t := s.queues[Demand].pop(); t != nil {
		return t
	}
	nonDemand := s.running[Readahead] + s.running[Background]
	if s.closed || nonDemand < s.readaheadWorkers() {
		if t := s.queues[Readahead].pop(); t != nil {
			return t
		}
	}
	if s.closed || nonDemand < s.cfg.Workers-s.cfg.Reserved {
		if !s.closed && !s.gate.open(s, s.queues[Background].peek()) {
			return nil // the cap's timer wakes a worker when it is paid for
		}
		return s.queues[Background].pop()
	}
	return nil
}

// readaheadWorkers is how many workers Readahead and Background tasks
// may hold together: all but one, so that a demand task never waits
// for more than one fetch to end; a pool of one worker lets them have
// it, or they would never run.
func (s *Scheduler) readaheadWorkers() int { return max(s.cfg.Workers-1, 1) }

// Spare returns how many more tasks at prio would start at once if they
// were submitted now: the workers that are free and that tasks of prio
// may use, less the tasks already queued that would take them first (at
// prio or higher). A running task that has work it could split uses it
// to take only workers nothing else is waiting for. It is a snapshot:
// tasks submitted meanwhile may take the workers first, and then a task
// submitted on its strength waits in the queue like any other.
func (s *Scheduler) Spare(prio Priority) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	busy := 0
	for p := range s.running {
		busy += s.running[p]
	}
	for p := prio; p < numPriorities; p++ {
		busy += s.queues[p].n
	}
	spare := s.cfg.Workers - busy
	// The workers that pickLocked lets non-demand tasks use, less the
	// ones running or queued for them ahead of this one.
	nonDemand := s.running[Readahead] + s.running[Background]
	switch prio {
	case Readahead:
		spare = min(spare, s.readaheadWorkers()-nonDemand-s.queues[Readahead].n)
	case Background:
		spare = min(spare, s.cfg.Workers-s.cfg.Reserved-nonDemand-s.queues[Readahead].n-s.queues[Background].n)
		if s.cfg.BackgroundRate > 0 {
			spare = 0 // a capped fetch gains nothing from more connections
		}
	}
	return max(spare, 0)
}

// Close cancels the context of running tasks, runs the queued ones with
// that cancelled context, and waits for every worker to exit.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.gate.stop()
	s.mu.Unlock()
	s.cancel()
	s.cond.Broadcast()
	s.wg.Wait()
}

// Stats is a snapshot of the scheduler's counters.
type Stats struct {
	Workers   int                  `stat:"workers" kind:"gauge"`
	Queued    [numPriorities]int   `stat:"queued_background,queued_readahead,queued_demand" kind:"gauge"`    // tasks waiting, by priority
	Running   [numPriorities]int   `stat:"running_background,running_readahead,running_demand" kind:"gauge"` // tasks running, by priority
	Submitted [numPriorities]int64 // tasks submitted, by first priority
	Completed [numPriorities]int64 // tasks run, by the priority they ended at
	Raised    int64                `stat:"raised"`                 // tasks moved to a higher priority
	Throttled time.Duration        `stat:"background_throttle_ns"` // time background tasks waited for Config.BackgroundRate, summed
	Cancelled int64                // tasks cancelled before they started
}

// Stats returns a snapshot of the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Workers: s.cfg.Workers, Running: s.running, Submitted: s.submitted,
		Completed: s.completed, Raised: s.raised, Cancelled: s.cancelledN, Throttled: s.gate.waited}
	for p := range s.queues {
		st.Queued[p] = s.queues[p].n
	}
	return st
}
