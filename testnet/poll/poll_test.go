package poll_test

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/testnet/poll"
)

// failing is a test that records its failure instead of reporting it.
type failing struct {
	testing.TB
	failed string
}

func (f *failing) Helper() {}
func (f *failing) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Until on a failing test in its own goroutine, as Goexit needs,
// and returns the failure, "" if none, and how long Until took.
func run(t *testing.T, within time.Duration, cond func() bool) (string, time.Duration) {
	f := &failing{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll.Until(f, "the thing", within, cond)
	}()
	<-done
	return f.failed, time.Since(start)
}

// Until returns as soon as the condition holds.
func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := 0
		failed, took := run(t, time.Minute, func() bool { asked++; return asked == 5 })
		if failed != "" {
			t.Fatal(failed)
		}
		if want := 4 * poll.Every; took != want {
			t.Fatalf("took %s, want %s (four waits between five asks)", took, want)
		}
	})
}

// A condition that never holds fails the test at the deadline, naming what
// it waited for and how long.
func TestUntilFailsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failed, took := run(t, time.Second, func() bool { return false })
		if want := "timed out after 1s waiting for the thing"; failed != want {
			t.Fatalf("failed with %q, want %q", failed, want)
		}
		if took < time.Second || took > time.Second+poll.Every {
			t.Fatalf("gave up after %s, deadline 1s", took)
		}
	})
}
