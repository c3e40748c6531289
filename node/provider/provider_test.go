package provider

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/state"
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

type memRecords struct {
	mu sync.Mutex
	m  map[string]Record
}

func (r *memRecords) Put(prefix, id string, v any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[prefix+id] = *v.(*Record)
	return nil
}

func (r *memRecords) Each(prefix string, fn func([]byte) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.m {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

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
func (u *unpins) Export(context.Context, cid.Cid, string, content.Progress) error { return nil }
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

func newTestProvider(t *testing.T, cfg Config, calls Caller, store Store, records Records) *Provider {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}) }
	self := wiretest.FreshParty(t)
	return New(cfg, Deps{
		Key: self.SK, Self: self.ID, Store: store, Calls: calls, Gossip: quietGossip{}, Records: records,
		Metrics: &Metrics{Leases: c(), Receipts: c(), PersistErrors: c()}, Log: slog.New(slog.DiscardHandler),
	})
}

// releasedLease is a lease whose job is over and whose output waits for its
// submitter.
func releasedLease(t *testing.T, end time.Time) *lease {
	prov, sub := wiretest.FreshParty(t), wiretest.FreshParty(t)
	return &lease{rec: &Record{
		Lease: wiretest.SignedLease(t, prov, sub), State: Released, Start: end.Add(-time.Minute),
		OutputStart: end.Add(-time.Second), End: end, Output: wiretest.CID(t, "output"),
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, ReleaseAnnounced: true,
	}}
}

// Handing the output over gives up when its patience runs out, backing off
// between tries, and never tries past the deadline.
func TestDeliverOutputGivesUpAtItsPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := &absent{calls: map[protocol.ID]int{}}
		p := newTestProvider(t, Config{OutputTimeout: 10 * time.Minute}, calls, &unpins{}, &memRecords{m: map[string]Record{}})
		l := releasedLease(t, time.Now())
		sub, _ := peer.Decode(l.rec.Lease.Terms.Submitter)
		start := time.Now()
		err := p.deliverOutput(context.Background(), l, sub, 10*time.Second)
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
		records := &memRecords{m: map[string]Record{}}
		p := newTestProvider(t, Config{OutputTimeout: time.Minute, Retention: time.Hour, ReceiptTimeout: 15 * time.Second}, calls, store, records)
		l := releasedLease(t, time.Now())
		sub, _ := peer.Decode(l.rec.Lease.Terms.Submitter)
		start := time.Now()
		p.settle(l, sub)
		if took := time.Since(start); took > time.Hour {
			t.Fatalf("kept trying for %s, retention 1h", took)
		}
		if took := time.Since(start); took < 50*time.Minute {
			t.Fatalf("gave up after %s, retention 1h", took)
		}
		rec := records.m[state.PrefixLease+l.rec.ID()]
		if !rec.FinalSigned || rec.Reason == "" {
			t.Fatalf("lease not closed: %+v", rec)
		}
		if len(store.reasons) != 1 || store.reasons[0] != pinOutput(l.rec.ID()) {
			t.Fatalf("unpinned %v", store.reasons)
		}
		// Backoff doubles up to a minute: about 60 tries in an hour, not one
		// a second.
		if n := calls.count(wire.ProtoOutput); n < 50 || n > 80 {
			t.Fatalf("%d tries in an hour", n)
		}
	})
}
