package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
)

// A graceful drain stops nothing and takes no new work; a quick one stops
// the lease with ErrPreempted (which the run's ending reads as preempted,
// the provider's), and now with a cause that also leaves the run no
// grace; undrain takes work again. The drain is saved, and a restarted
// provider is still drained.
func TestDrain(t *testing.T) {
	prov := wiretest.FreshParty(t)
	recs := &statetest.Records{}
	p := newTestProvider(t, prov, Config{}, nil, nil, recs, nil)
	l := releasedLease(t, p, prov, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	l.cancel = cancel
	p.leases.add(l)

	if _, err := p.Drain("sometimes", time.Time{}); err == nil {
		t.Fatal("a drain of no mode was taken")
	}
	d, err := p.Drain(api.DrainGraceful, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil || !p.Draining() || d.Mode != api.DrainGraceful || d.Leases != 1 {
		t.Fatalf("graceful: stopped %v, draining %v, %+v; want the lease running, the node draining", ctx.Err(), p.Draining(), d)
	}
	again := newTestProvider(t, prov, Config{}, nil, nil, recs, nil)
	if err := again.drain.recover(); err != nil || !again.Draining() {
		t.Fatalf("after a restart: draining %v (%v), want still drained", again.Draining(), err)
	}

	if _, err := p.Drain(api.DrainQuick, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctx), ErrPreempted) || errors.Is(context.Cause(ctx), exec.ErrStopNow) {
		t.Fatalf("quick: cause %v, want ErrPreempted with the grace", context.Cause(ctx))
	}
	e := runEnding(ctx, exec.Spec{}, exec.Result{Outcome: exec.Stopped}, nil)
	if e.Outcome != ledger.OutcomePreempted || e.Attribution != ledger.AttributionProvider {
		t.Fatalf("a run stopped by a quick drain ends %s/%s, want preempted/provider", e.Outcome, e.Attribution)
	}

	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	l.mu.Lock()
	l.cancel = cancel2
	l.mu.Unlock()
	if _, err := p.Drain(api.DrainNow, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctx2), ErrPreempted) || !errors.Is(context.Cause(ctx2), exec.ErrStopNow) {
		t.Fatalf("now: cause %v, want ErrPreempted and no grace", context.Cause(ctx2))
	}

	p.Undrain()
	if p.Draining() {
		t.Fatal("still draining after undrain")
	}
	found := false
	if err := recs.Each(state.PrefixDrain, func([]byte) error { found = true; return nil }); err != nil || found {
		t.Fatalf("a drain record outlived undrain (%v)", err)
	}
}

// A graceful drain with a deadline drains quickly what still runs then.
func TestGracefulDrainDeadline(t *testing.T) {
	prov := wiretest.FreshParty(t)
	p := newTestProvider(t, prov, Config{}, nil, nil, &statetest.Records{}, nil)
	l := releasedLease(t, p, prov, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	l.cancel = cancel
	p.leases.add(l)
	if _, err := p.Drain(api.DrainGraceful, time.Now().Add(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease still runs long after the drain's deadline")
	}
	if !errors.Is(context.Cause(ctx), ErrPreempted) {
		t.Fatalf("at the deadline: cause %v, want ErrPreempted", context.Cause(ctx))
	}
}

// The reclaim watcher's drain is quick, shown as the watcher's, and lifted
// by Return alone; it never lifts the owner's drain, nor the owner's
// undrain the watcher's.
func TestReclaimBesideOwnerDrain(t *testing.T) {
	prov := wiretest.FreshParty(t)
	p := newTestProvider(t, prov, Config{}, nil, nil, &statetest.Records{}, nil)
	l := releasedLease(t, p, prov, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	l.cancel = cancel
	p.leases.add(l)

	p.Reclaim("owner started using GPU 0 (pid 4242)")
	if d := p.DrainStatus(); !p.Draining() || d.By != api.DrainByReclaim || d.Mode != api.DrainQuick || d.Reason == "" {
		t.Fatalf("after Reclaim: %+v, want a quick drain by the watcher, saying why", d)
	}
	if !errors.Is(context.Cause(ctx), ErrPreempted) {
		t.Fatalf("the running lease was not preempted: cause %v", context.Cause(ctx))
	}
	if _, err := p.Drain(api.DrainGraceful, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if d := p.DrainStatus(); d.By != api.DrainByOwner {
		t.Fatalf("with both: shown as %q, want the owner's", d.By)
	}
	p.Return()
	if d := p.DrainStatus(); !p.Draining() || d.By != api.DrainByOwner {
		t.Fatalf("Return lifted the owner's drain: %+v", d)
	}
	p.Reclaim("again")
	p.Undrain()
	if d := p.DrainStatus(); !p.Draining() || d.By != api.DrainByReclaim {
		t.Fatalf("undrain lifted the watcher's drain: %+v", d)
	}
	p.Return()
	if p.Draining() {
		t.Fatalf("still draining after both were lifted: %+v", p.DrainStatus())
	}
}

// A drain for a stop preempts what runs once its graceful time is over and
// returns only when every lease is settled, so that each submitter has
// pulled its last checkpoint before the daemon goes.
func TestDrainToStopWaitsForSettlement(t *testing.T) {
	prov := wiretest.FreshParty(t)
	p := newTestProvider(t, prov, Config{}, nil, nil, &statetest.Records{}, nil)
	l := releasedLease(t, p, prov, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	l.cancel = cancel
	id := l.rec.Lease.Terms.ID
	p.leases.add(l)

	done := make(chan struct{})
	go func() {
		defer close(done)
		p.DrainToStop(context.Background(), 10*time.Millisecond)
	}()
	<-ctx.Done() // preempted after the graceful 10ms
	if !errors.Is(context.Cause(ctx), ErrPreempted) {
		t.Fatalf("cause %v, want ErrPreempted", context.Cause(ctx))
	}
	select {
	case <-done:
		t.Fatal("the stop's drain returned with a lease unsettled")
	default:
	}
	if d := p.DrainStatus(); d.By != api.DrainByStop {
		t.Fatalf("during the stop: %+v, want a drain by the stop", d)
	}
	p.leases.settledLease(id)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stop's drain did not return once the lease was settled")
	}
}

// A quick drain holds against leases signed after it stopped what ran (a
// proposal in flight when it came); a graceful one lets them run.
func TestDrainPreemptsLeasesSignedAfter(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		d    drains
		want error
	}{
		{"none", drains{}, nil},
		{"graceful", drains{owner: &drainRecord{Mode: api.DrainGraceful}}, nil},
		{"graceful past its deadline", drains{owner: &drainRecord{Mode: api.DrainGraceful, Deadline: now.Add(-time.Second)}}, ErrPreempted},
		{"quick", drains{owner: &drainRecord{Mode: api.DrainQuick}}, ErrPreempted},
		{"now", drains{owner: &drainRecord{Mode: api.DrainNow}}, exec.ErrStopNow},
		{"reclaimed", drains{reclaim: &drainRecord{Mode: api.DrainQuick}}, ErrPreempted},
		{"stopping, graceful", drains{stop: &drainRecord{Mode: api.DrainGraceful, Deadline: now.Add(time.Minute)}}, nil},
		{"stopping, past", drains{stop: &drainRecord{Mode: api.DrainGraceful, Deadline: now.Add(-time.Second)}}, ErrPreempted},
	} {
		got := tc.d.preempting(now)
		if (got == nil) != (tc.want == nil) || (tc.want != nil && !errors.Is(got, tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
