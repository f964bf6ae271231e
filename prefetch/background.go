package prefetch

import "time"

// bgGate holds Background tasks to Config.BackgroundRate. It schedules
// by virtual time: paid is when the bytes of every task let through so
// far are paid for at the rate. The task at the head of the Background
// queue, when first looked at, is given its own time, ready: paid (or
// now, if that is later) plus its cost at the rate, and paid moves
// there; it starts once ready has come. So over any run of background
// tasks the bytes started never get ahead of the rate by more than the
// task about to start, and the cap holds whatever the tasks' number,
// the pool's size or how fast the store answers. Waiting happens in
// the queue, not on a worker: no worker is held, readahead and demand
// keep the whole pool, and the GETs themselves run at full speed. A
// timer wakes the workers when the head's time comes.
//
// Guarded by the Scheduler's mu.
type bgGate struct {
	paid   time.Time
	timer  *time.Timer
	waited time.Duration // summed over tasks let through: from first looked at to let through
}

// costOf is the time cost bytes take at rate bytes per second.
func costOf(cost, rate int64) time.Duration {
	return time.Duration(float64(cost) / float64(rate) * float64(time.Second))
}

// open reports whether t, the next Background task, may start now. A
// task without a cost, or a scheduler without a rate, always may.
func (g *bgGate) open(s *Scheduler, t *Task) bool {
	rate := s.cfg.BackgroundRate
	if t == nil || t.cost <= 0 || rate <= 0 {
		return true
	}
	now := time.Now()
	if t.ready.IsZero() {
		t.ready = later(g.paid, now).Add(costOf(t.cost, rate))
		t.looked = now
		g.paid = t.ready
	}
	if !now.Before(t.ready) {
		g.waited += now.Sub(t.looked)
		return true
	}
	d := t.ready.Sub(now)
	if g.timer == nil {
		g.timer = time.AfterFunc(d, s.cond.Broadcast)
	} else {
		g.timer.Reset(d)
	}
	return false
}

// release gives back the time of a task that leaves the Background
// queue before it starts (raised or cancelled), if it was the last one
// given a time; an earlier one's time is left: the cap is then
// undershot a little, never overshot.
func (g *bgGate) release(t *Task, rate int64) {
	if t.ready.IsZero() || rate <= 0 {
		return
	}
	if g.paid.Equal(t.ready) {
		g.paid = g.paid.Add(-costOf(t.cost, rate))
	}
	t.ready = time.Time{}
}

// stop stops the timer, at Close.
func (g *bgGate) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
