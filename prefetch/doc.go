// Package prefetch schedules every remote fetch of a mount on one fixed
// pool of worker goroutines.
//
// Invariants:
//   - The number of goroutines running fetches is Config.Workers, fixed at
//     New: it never grows with the number of files, parts or readers.
//     Submitting a task only queues it.
//   - Three priorities: Demand (a reader is blocked on it) before Readahead
//     (a sequential reader will want it soon) before Background (filling a
//     file or a shard). A Demand task never queues behind background work:
//     Config.Reserved workers take only Demand tasks, so a Demand task
//     starts as soon as a reserved worker is free, and at worst when one
//     running fetch ends.
//   - Within a priority, tasks are grouped (one group per file) and the
//     groups are served round-robin, so one large file cannot starve the
//     others; within a group, first in, first out.
//   - A queued task can be raised to a higher priority (a reader now waits
//     for a part that was queued as background) or cancelled. A running
//     task can be raised too: it then counts at its new priority, so a
//     running readahead fetch that a reader waits on frees its readahead
//     slot.
//   - Every submitted task runs exactly once, or is cancelled by Cancel
//     before it started. After Close, queued tasks run with a cancelled
//     context so that whoever waits on them is released; Close returns when
//     every worker has exited.
package prefetch
