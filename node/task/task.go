// Package task runs the goroutines a long-lived part of the daemon starts
// (loops, leases, stream handlers) so that its Shutdown knows them all: a
// Group refuses new work once it is closing, and Wait returns when what was
// started has ended, or when the caller's patience runs out. Sleep is the
// wait such a goroutine makes between rounds: one that ends with its
// context. Every and NowAndEvery are the loop that does a round every
// interval until its context ends; Retry is the one that tries again,
// backing off, until a call succeeds, a deadline passes or the context
// ends.
package task

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
)

// Group is a set of goroutines that stop with their owner. The zero value
// is ready to use.
type Group struct {
	// OnPanic, when set before the first Go, is told what a goroutine of
	// the group panicked with, and its stack, and the panic stops there:
	// that goroutine's work is lost and the daemon goes on, as net/http
	// does with a request. Unset, a panic ends the process as usual.
	OnPanic func(v any, stack []byte)

	mu      sync.Mutex // guards closing and the Add half of wg
	closing bool
	wg      sync.WaitGroup
}

// Go runs fn in a goroutine unless the group is closing; it reports whether
// fn was started.
func (g *Group) Go(fn func()) bool {
	if !g.enter() {
		return false
	}
	go func() {
		defer g.wg.Done()
		if g.OnPanic != nil {
			defer func() {
				if v := recover(); v != nil {
					g.OnPanic(v, debug.Stack())
				}
			}()
		}
		fn()
	}()
	return true
}

// enter counts one piece of work more for Wait unless the group is
// closing; it reports whether it did, and the caller then calls wg.Done
// once the work has ended.
func (g *Group) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.wg.Add(1)
	return true
}

// Close stops the group from starting anything new.
func (g *Group) Close() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
}

// Wait closes the group and waits until every goroutine it started has
// returned, or ctx ends; it returns ctx's error in the second case.
func (g *Group) Wait(ctx context.Context) error {
	g.Close()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do runs fn in the calling goroutine unless the group is closing, and
// counts it among the work Wait waits for; it reports whether fn ran.
func (g *Group) Do(fn func()) bool {
	if !g.enter() {
		return false
	}
	defer g.wg.Done()
	fn()
	return true
}

// Sleep waits for d or until ctx ends, whichever is first, and returns
// ctx's error in the second case. A d of zero or less does not wait but
// still reports an ended ctx, so that a loop whose next round is already
// due stops when it should.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
