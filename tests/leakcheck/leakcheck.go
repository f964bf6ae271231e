// Package leakcheck lets a test check that what it started has ended: the
// process's goroutines fall back to the count taken before.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Settle waits up to within for runtime.NumGoroutine to fall back to
// before, and otherwise fails t with every goroutine's stack. It may be
// called from t.Cleanup.
func Settle(t testing.TB, before int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
