package prefetch

import "container/list"

// fairQueue holds the tasks of one priority: a FIFO per group, and the
// groups with queued tasks in a ring served round-robin. The zero value
// needs init. Not safe for concurrent use; the scheduler's mu guards it.
type fairQueue struct {
	groups map[string]*groupQueue
	ring   list.List // of *groupQueue with at least one task, next to serve first
	n      int       // tasks queued
}

type groupQueue struct {
	name  string
	tasks list.List     // of *Task, oldest first
	elem  *list.Element // in the ring while tasks is non-empty
}

func (q *fairQueue) init() {
	q.groups = make(map[string]*groupQueue)
}

// push appends t to its group's FIFO.
func (q *fairQueue) push(t *Task) {
	g := q.groups[t.group]
	if g == nil {
		g = &groupQueue{name: t.group}
		q.groups[t.group] = g
	}
	t.elem = g.tasks.PushBack(t)
	if g.elem == nil {
		g.elem = q.ring.PushBack(g)
	}
	q.n++
}

// pop removes the oldest task of the group whose turn it is, and moves
// that group to the back of the ring.
func (q *fairQueue) pop() *Task {
	front := q.ring.Front()
	if front == nil {
		return nil
	}
	g := front.Value.(*groupQueue)
	t := g.tasks.Remove(g.tasks.Front()).(*Task)
	t.elem = nil
	q.n--
	if g.tasks.Len() == 0 {
		q.dropGroup(g)
	} else {
		q.ring.MoveToBack(g.elem)
	}
	return t
}

// peek returns the task pop would return, or nil, leaving it queued.
func (q *fairQueue) peek() *Task {
	front := q.ring.Front()
	if front == nil {
		return nil
	}
	return front.Value.(*groupQueue).tasks.Front().Value.(*Task)
}

// remove takes a queued t out of its group.
func (q *fairQueue) remove(t *Task) {
	g := q.groups[t.group]
	g.tasks.Remove(t.elem)
	t.elem = nil
	q.n--
	if g.tasks.Len() == 0 {
		q.dropGroup(g)
	}
}

func (q *fairQueue) dropGroup(g *groupQueue) {
	q.ring.Remove(g.elem)
	g.elem = nil
	delete(q.groups, g.name)
}
