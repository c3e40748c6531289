package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A lease released by its submitter before the run stops with a cause of
// its own, so that the provider's record says provider-lost; a release
// signed by anyone else stops nothing.
func TestStopLeaseOnlyForItsSubmitter(t *testing.T) {
	prov := wiretest.FreshParty(t)
	p := newTestProvider(t, prov, Config{}, nil, nil, &statetest.Records{}, nil)
	l := releasedLease(t, p, prov, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	l.cancel = cancel
	id := l.rec.Lease.Terms.ID
	p.leases.add(l)

	p.StopLease(id, wiretest.FreshParty(t).ID)
	if ctx.Err() != nil {
		t.Fatal("a stranger's release stopped the lease")
	}
	sub, err := peer.Decode(l.rec.Lease.Terms.Submitter)
	if err != nil {
		t.Fatal(err)
	}
	p.StopLease("another lease", sub)
	if ctx.Err() != nil {
		t.Fatal("another lease's release stopped the lease")
	}
	p.StopLease(id, sub)
	if !errors.Is(context.Cause(ctx), ErrReleasedUnrun) {
		t.Fatalf("after the submitter's release the cause is %v, want %v", context.Cause(ctx), ErrReleasedUnrun)
	}
}
