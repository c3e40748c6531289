package task

import (
	"context"
	"errors"
	"time"
)

// Backoff is the wait between the tries of Retry: First after the first
// failure, doubling after each one up to Most (at least First).
type Backoff struct {
	First time.Duration
	Most  time.Duration
}

// Next is the wait after one of wait: twice as long, at most b.Most.
func (b Backoff) Next(wait time.Duration) time.Duration {
	return min(2*wait, b.Most)
}

// Retry calls fn until it returns nil, ctx ends, or the next try would
// start after deadline (a zero deadline sets none), waiting between the
// tries as b says. It returns fn's last error, which a caller tells from
// ctx's own by looking at ctx. fn returns Final(err) for an error no
// later try would mend: Retry then returns err at once.
func Retry(ctx context.Context, b Backoff, deadline time.Time, fn func() error) error {
	wait := b.First
	for {
		err := fn()
		var final finalError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &final):
			return final.err
		case ctx.Err() != nil:
			return err
		case !deadline.IsZero() && !time.Now().Add(wait).Before(deadline):
			return err
		}
		if Sleep(ctx, wait) != nil {
			return err
		}
		wait = b.Next(wait)
	}
}

// Final marks err, returned by a function Retry calls, as one that ends
// the tries: Retry returns err itself. Final(nil) is nil.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return finalError{err}
}

// finalError is an error Final marked.
type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }
