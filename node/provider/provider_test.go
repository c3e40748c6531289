package provider

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// Fakes around the provider, for tests of its own timing code; the
// in-process tests in package node run it against the real parts.

// absent is a submitter that never answers.
type absent struct {
	mu    sync.Mutex
	calls map[protocol.ID]int
}

func (a *absent) Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error {
	a.mu.Lock()
	a.calls[proto]++
	a.mu.Unlock()
	return errors.New("no route to the submitter")
}

func (a *absent) count(proto protocol.ID) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[proto]
}

type unpins struct {
	mu      sync.Mutex
	reasons []string
}

func (u *unpins) Import(context.Context, string, content.ImportOptions) (cid.Cid, int64, error) {
	return cid.Undef, 0, nil
}
func (u *unpins) Export(context.Context, cid.Cid, string, content.ExportOptions) error { return nil }
func (u *unpins) Resolve(context.Context, cid.Cid, string) (cid.Cid, error) {
	return cid.Undef, content.ErrNotFound
}
func (u *unpins) Pins(context.Context) ([]content.Pin, error) { return nil, nil }
func (u *unpins) GC(context.Context) (int, error)             { return 0, nil }
func (u *unpins) Unpin(_ context.Context, _ cid.Cid, reason string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reasons = append(u.reasons, reason)
	return nil
}

type quietGossip struct{}

func (quietGossip) Publish(context.Context, string, string, any) (p2p.Signed, error) {
	return p2p.Signed{}, nil
}

func newTestProvider(t *testing.T, self wiretest.Party, cfg Config, calls Caller, store Store, records Records, led Ledger) *Provider {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}) }
	return New(cfg, Deps{
		Key: self.SK, Self: self.ID, Store: store, Calls: calls, Gossip: quietGossip{}, Records: records, Ledger: led,
		Metrics: &Metrics{Leases: c(), Receipts: c(), PersistErrors: c()}, Log: slog.New(slog.DiscardHandler),
	})
}

// stored is the lease's record as the provider last wrote it.
func stored(t *testing.T, records *statetest.Records, id string) Record {
	t.Helper()
	var rec Record
	if ok, err := records.Get(state.PrefixLease, id, &rec); !ok || err != nil {
		t.Fatalf("no record of lease %s (%v)", id, err)
	}
	return rec
}

// releasedLease is a lease whose job is over and whose output waits for its
// submitter.
func releasedLease(t *testing.T, p *Provider, prov wiretest.Party, end time.Time) *leaseRunner {
	sub := wiretest.FreshParty(t)
	return p.newRunner(&Record{
		Lease: wiretest.SignedLease(t, prov, sub), State: Released,
		Declaration: market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil), Start: end.Add(-time.Minute),
		OutputStart: end.Add(-time.Second), End: end, Output: wiretest.CID(t, "output"),
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, ReleaseAnnounced: true,
	}, sub.ID)
}

// Handing the output over gives up when its patience runs out, backing off
// between tries, and never tries past the deadline.
func TestDeliverOutputGivesUpAtItsPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := &absent{calls: map[protocol.ID]int{}}
		self := wiretest.FreshParty(t)
		p := newTestProvider(t, self, Config{OutputTimeout: 10 * time.Minute}, calls, &unpins{}, &statetest.Records{}, &ledgertest.Memory{})
		l := releasedLease(t, p, self, time.Now())
		start := time.Now()
		err := l.deliverOutput(context.Background(), 10*time.Second)
		if err == nil {
			t.Fatal("output handed to an absent submitter")
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("gave up after %s, patience 10s", took)
		}
		// Tries at 0, 0.5, 1.5, 3.5 and 7.5 s; the next would start at 15.5 s.
		if n := calls.count(wire.ProtoOutput); n != 5 {
			t.Fatalf("%d tries, want 5", n)
		}
		if !l.snapshot().OutputAcked.IsZero() {
			t.Fatal("output marked handed over")
		}
	})
}

// A submitter that never returns within the retention window: the output is
// unpinned and the lease closed, with nothing more to sign.
func TestSettleGivesUpAfterRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := &absent{calls: map[protocol.ID]int{}}
		store := &unpins{}
		records := &statetest.Records{}
		led := &ledgertest.Memory{}
		self := wiretest.FreshParty(t)
		p := newTestProvider(t, self, Config{OutputTimeout: time.Minute, Retention: time.Hour, ReceiptTimeout: 15 * time.Second}, calls, store, records, led)
		l := releasedLease(t, p, self, time.Now())
		start := time.Now()
		l.settle()
		if took := time.Since(start); took > time.Hour {
			t.Fatalf("kept trying for %s, retention 1h", took)
		}
		if took := time.Since(start); took < 50*time.Minute {
			t.Fatalf("gave up after %s, retention 1h", took)
		}
		rec := stored(t, records, l.rec.ID())
		if !rec.FinalSigned || rec.Reason == "" {
			t.Fatalf("lease not closed: %+v", rec)
		}
		if len(store.reasons) != 1 || store.reasons[0] != pinOutput(l.rec.ID()) {
			t.Fatalf("unpinned %v", store.reasons)
		}
		// The lease's record was stored at the first failed try, once.
		oneSided := led.OneSided()
		if len(oneSided) != 1 {
			t.Fatalf("%d one-sided records", len(oneSided))
		}
		if r := oneSided[0]; r.Signer != ledger.SignerProvider || r.Verify() != nil || !r.HeldUntil.Equal(l.rec.End) {
			t.Fatalf("one-sided record %+v (verify %v)", r, r.Verify())
		}
		// Backoff doubles up to a minute: about 60 tries in an hour, not one
		// a second.
		if n := calls.count(wire.ProtoOutput); n < 50 || n > 80 {
			t.Fatalf("%d tries in an hour", n)
		}
	})
}

// Staging over a path that is only relayed waits for a hole to be punched,
// then fails naming why, rather than stalling on a relay that carries no
// data.
func TestStagingWaitsForADirectPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		self := wiretest.FreshParty(t)
		p := newTestProvider(t, self, Config{}, &absent{calls: map[protocol.ID]int{}}, &unpins{}, &statetest.Records{}, &ledgertest.Memory{})
		p.d.Path = func(peer.ID) (p2p.Path, string) { return p2p.PathRelayed, "hole punch failed: all retries failed" }
		start := time.Now()
		_, err := p.src.fetch(context.Background(), wiretest.FreshParty(t).ID, cid.Undef, content.FetchOptions{})
		if err == nil || !strings.Contains(err.Error(), "hole punch failed") || !strings.Contains(err.Error(), "relayed") {
			t.Fatalf("err = %v, want one naming the relayed path and the failed punch", err)
		}
		if took := time.Since(start); took < p2p.DirectWait || took > p2p.DirectWait+time.Second {
			t.Fatalf("gave up after %s, want %s", took, p2p.DirectWait)
		}
	})
}
