// Package testmem measures what code allocates, for the tests that
// bound what a decoder of untrusted bytes may build (issue 42). It
// counts bytes, never time: a figure that a loaded machine cannot move.
package testmem

import "runtime"

// Allocated returns the bytes the heap allocated while fn ran (after a
// collection, so that garbage of before is not counted). The count is
// the whole process's: a test that calls it must not run in parallel
// with others.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
