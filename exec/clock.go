package exec

import "time"

// Clock is the time source of a Runner: the start and end of a run, its
// limit and its grace period. It matches github.com/benbjohnson/clock's
// Clock, so that library's mock can drive a Runner in a test.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
