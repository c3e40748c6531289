package provider

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
)

// Inside its hours the node says when its window closes and takes only
// jobs whose limit ends by then; outside, it takes nothing; at the
// window's end it drains quickly what still runs, and tells the offer at
// each change.
func TestHours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		// Open for the first two hours, then from 34h to 35h.
		sched := windows{{now, now.Add(2 * time.Hour)}, {now.Add(34 * time.Hour), now.Add(35 * time.Hour)}}
		prov := wiretest.FreshParty(t)
		changed := make(chan struct{}, 8)
		p := newTestProvider(t, prov, Config{Hours: sched}, nil, nil, &statetest.Records{}, nil)
		p.d.OfferChanged = func() { changed <- struct{}{} }

		closed, until := p.Window(now)
		if closed || until != now.Add(2*time.Hour).UnixMilli() {
			t.Fatalf("window at the start: closed %v, until %s; want open until 02:00", closed, time.UnixMilli(until).UTC())
		}
		if !p.hours.inHours(now, time.Hour, 0) || p.hours.inHours(now, 3*time.Hour, 0) {
			t.Fatal("a 1h job must fit the window and a 3h one must not")
		}
		// A 3h job that checkpoints every 20m may be cut at the close; one
		// that checkpoints every 2h would get no checkpoint in by then.
		if !p.hours.inHours(now, 3*time.Hour, 20*time.Minute) || p.hours.inHours(now, 3*time.Hour, 2*time.Hour) {
			t.Fatal("a 3h job checkpointing every 20m must be taken to be cut, one every 2h must not")
		}

		l := releasedLease(t, p, prov, now)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		l.cancel = cancel
		p.leases.add(l)
		go p.hours.watch()

		time.Sleep(2*time.Hour + time.Second)
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), ErrPreempted) {
			t.Fatalf("at the window's end the lease was not drained: cause %v", context.Cause(ctx))
		}
		if len(changed) == 0 {
			t.Fatal("the offer was not told of the window's end")
		}
		if closed, _ := p.Window(time.Now()); !closed || p.hours.inHours(time.Now(), time.Minute, 0) {
			t.Fatal("after the window the node still takes work")
		}
		for len(changed) > 0 {
			<-changed
		}
		time.Sleep(time.Until(now.Add(34 * time.Hour))) // Sun 10:00
		synctest.Wait()
		if len(changed) == 0 {
			t.Fatal("the offer was not told of the next window's opening")
		}
		if closed, until := p.Window(time.Now()); closed || until != now.Add(35*time.Hour).UnixMilli() {
			t.Fatalf("in the next window: closed %v, until %s; want open until Sun 11:00", closed, time.UnixMilli(until).UTC())
		}
		p.cancel()
		synctest.Wait()
	})
}

// windows are hours as intervals of absolute time, in order.
type windows [][2]time.Time

func (w windows) Open(t time.Time) bool { return !w.Closes(t).IsZero() }

func (w windows) Closes(t time.Time) time.Time {
	for _, iv := range w {
		if !t.Before(iv[0]) && t.Before(iv[1]) {
			return iv[1]
		}
	}
	return time.Time{}
}

func (w windows) Opens(t time.Time) time.Time {
	for _, iv := range w {
		if iv[0].After(t) {
			return iv[0]
		}
	}
	return time.Time{}
}
