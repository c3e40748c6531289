package api

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultReconnectFor is how long a command that follows jobs goes on
// asking a daemon that stopped answering: long enough for a restart (a
// stop drains, then the daemon starts again), short enough that a daemon
// gone for good is said within minutes.
const DefaultReconnectFor = 2 * time.Minute

// defaultReconnectEvery is the pause between tries of Reconnect.Do.
const defaultReconnectEvery = time.Second

// Reconnect outlasts a restart of the daemon: it tries a call again while
// the call reaches no daemon (ErrNoDaemon), for a bounded time. Any other
// error (a job not found, a request refused) ends it at once: the daemon
// answered. A Reconnect is used by one goroutine at a time; the zero value
// (or nil) tries each call once.
type Reconnect struct {
	// For is how long the daemon may stay unreachable, counted from the
	// first call that found none; 0 or less: calls are not tried again.
	For time.Duration
	// Every is the pause between tries; 0: a second.
	Every time.Duration
	// Lost, when set, is called once each time the daemon stops
	// answering, with the error that said so, before the first pause.
	Lost func(err error)
	// Back, when set, is called once each time the daemon answers again
	// after Lost, with how long it was unreachable.
	Back func(down time.Duration)

	down time.Time // since when the daemon has not answered; zero: it answers
}

// Do runs call until it reaches the daemon, the daemon has been
// unreachable for r.For, or ctx ends. It returns call's last error; when
// the daemon stayed away, that error still wraps ErrNoDaemon and says for
// how long it was tried.
func (r *Reconnect) Do(ctx context.Context, call func(context.Context) error) error {
	for {
		err := call(ctx)
		if !errors.Is(err, ErrNoDaemon) || ctx.Err() != nil {
			if !errors.Is(err, ErrNoDaemon) {
				r.Reached()
			}
			return err
		}
		if r == nil || r.For <= 0 {
			return err
		}
		if r.down.IsZero() {
			r.down = time.Now()
			if r.Lost != nil {
				r.Lost(err)
			}
		}
		if time.Since(r.down) >= r.For {
			return fmt.Errorf("gave up after %s without an answer: %w", r.For, err)
		}
		every := r.Every
		if every <= 0 {
			every = defaultReconnectEvery
		}
		t := time.NewTimer(min(every, max(r.For-time.Since(r.down), 0)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Reached tells r that the daemon answered, which Do learns by itself when
// its call returns: a long call (a log followed as it is written) says so
// as soon as the daemon sends something, so that Back is called then.
func (r *Reconnect) Reached() {
	if r == nil || r.down.IsZero() {
		return
	}
	down := time.Since(r.down)
	r.down = time.Time{}
	if r.Back != nil {
		r.Back(down)
	}
}
