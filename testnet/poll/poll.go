package poll

import (
	"testing"
	"time"
)

// Every is how often Until asks its condition again: often enough that a
// test waits little past the moment the condition holds, seldom enough
// that asking (a peer count, a view lookup) costs nothing.
const Every = 10 * time.Millisecond

// Until asks cond, then again every Every, until it holds, and fails tb,
// naming what and within, if it still does not after within. Like
// tb.Fatalf, it must be called from the test's goroutine. In a
// testing/synctest bubble its clock is the bubble's, so waiting is instant.
func Until(tb testing.TB, what string, within time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(Every)
	}
}

// Eventually asks cond, then again every every, until it holds or within
// has passed, and says whether it held: for a wait whose failure the
// caller reports itself, with what it found.
func Eventually(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
