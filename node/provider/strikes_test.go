package provider

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// refusing is a submitter that answers every receipt with a refusal.
type refusing struct {
	mu       sync.Mutex
	receipts int
}

func (r *refusing) Call(_ context.Context, _ peer.ID, proto protocol.ID, _, _ any) error {
	if proto == wire.ProtoReceipt {
		r.mu.Lock()
		r.receipts++
		r.mu.Unlock()
	}
	return &p2p.RemoteError{Code: wire.CodeOutsideLease, Msg: "no"}
}

func (r *refusing) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.receipts
}

// A submitter that refuses maxRefusedReceipts receipts in a row has the
// lease stopped and is struck off: its jobs get no proposal while the
// strike lasts, it doubles on the next, and a restart keeps it. One that
// cannot be reached at all is away, not refusing: its lease goes on.
func TestRefusedReceiptsStopTheLeaseAndStrike(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		self := wiretest.FreshParty(t)
		records := &statetest.Records{}
		calls := &refusing{}
		p := newTestProvider(t, self, Config{ReceiptInterval: time.Minute, ReceiptTimeout: 15 * time.Second}, calls, &unpins{}, records, &ledgertest.Memory{})
		sub := wiretest.FreshParty(t)
		lr := p.newRunner(&Record{
			Lease: wiretest.SignedLease(t, self, sub), State: Running,
			Declaration: market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil), Start: time.Now(),
		}, sub.ID)
		start := time.Now()
		ctx, cancel := context.WithCancelCause(context.Background())
		lr.arm(cancel)
		done := make(chan struct{})
		go func() { defer close(done); lr.receipts.interim(ctx) }()
		time.Sleep(time.Duration(maxRefusedReceipts)*time.Minute + time.Second)
		synctest.Wait()
		<-done
		if n := calls.count(); n != maxRefusedReceipts {
			t.Fatalf("%d receipts offered, want %d", n, maxRefusedReceipts)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrReceiptsRefused) || !errors.Is(cause, ErrWithdrawn) {
			t.Fatalf("the lease stopped with %v, want ErrReceiptsRefused", cause)
		}
		st, struck := p.Struck(sub.ID.String(), time.Now())
		struckAt := start.Add(time.Duration(maxRefusedReceipts) * time.Minute) // at the last refusal
		if !struck || st.Count != 1 || !st.Until.Equal(struckAt.Add(strikeFor)) {
			t.Fatalf("strike %+v (in force %v), want one lasting %s", st, struck, strikeFor)
		}
		again := p.strikes.add(sub.ID, "again", time.Now())
		if !again.Until.Equal(time.Now().Add(2 * strikeFor)) {
			t.Fatalf("second strike lasts until %s, want twice the first", again.Until)
		}

		// Kept across a restart.
		var kept Strike
		if ok, err := records.Get(state.PrefixStrike, sub.ID.String(), &kept); !ok || err != nil || kept.Count != 1 {
			t.Fatalf("strike record %+v (%v %v)", kept, ok, err)
		}
		q := newTestProvider(t, self, Config{}, calls, &unpins{}, records, &ledgertest.Memory{})
		if err := q.strikes.recover(); err != nil {
			t.Fatal(err)
		}
		if _, struck := q.Struck(sub.ID.String(), time.Now()); !struck {
			t.Fatal("a restart forgot the strike")
		}
		time.Sleep(strikeFor)
		if _, struck := q.Struck(sub.ID.String(), time.Now()); struck {
			t.Fatal("the strike did not lift")
		}

		// Away: no strike, the lease goes on.
		away := &absent{calls: map[protocol.ID]int{}}
		r := newTestProvider(t, self, Config{ReceiptInterval: time.Minute, ReceiptTimeout: 15 * time.Second}, away, &unpins{}, &statetest.Records{}, &ledgertest.Memory{})
		lr = r.newRunner(&Record{
			Lease: wiretest.SignedLease(t, self, sub), State: Running,
			Declaration: market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil), Start: time.Now(),
		}, sub.ID)
		ctx, cancel = context.WithCancelCause(context.Background())
		lr.arm(cancel)
		done = make(chan struct{})
		go func() { defer close(done); lr.receipts.interim(ctx) }()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatalf("the lease of an unreachable submitter stopped: %v", context.Cause(ctx))
		}
		cancel(nil)
		<-done
	})
}

// The held time a receipt claims never passes what the lease's terms
// allow: the provider bears what it holds past that.
func TestReceiptsClaimNoMoreThanTheLeaseAllows(t *testing.T) {
	self, sub := wiretest.FreshParty(t), wiretest.FreshParty(t)
	l := wiretest.SignedLease(t, self, sub)
	l.Terms.Bound = ledger.BoundRule
	rec := Record{Lease: l}
	most := rec.heldUntilMost()
	want := time.UnixMilli(l.Terms.Proposed).Add(time.Duration(l.Terms.Limit)*time.Millisecond + ledger.MaxGrace + ledger.OutputAllowance + ledger.MaxClockSkew)
	if !most.Equal(want) {
		t.Fatalf("held until at most %s, want %s", most, want)
	}
	if got := bounded(most.Add(time.Hour), most); !got.Equal(most) {
		t.Fatalf("an hour past the window claims %s", got)
	}
	l.Terms.Bound = 0
	if m := (Record{Lease: l}).heldUntilMost(); !m.IsZero() {
		t.Fatalf("terms from before the rule bound at %s", m)
	}
	if d := runLimit(wire.LeaseTerms{Bound: ledger.BoundRule, Proposed: 0, Limit: market.Hour}, time.UnixMilli(0).Add(20*time.Minute)); d != 40*time.Minute {
		t.Fatalf("a run starting 20m into a 1h lease may go %s, want 40m", d)
	}
}

// A submitter whose gangs never start here, their gang lease never sent,
// maxGangLapses times in a row gets no more gang parts for a while; a
// gang that starts between lapses breaks the row.
func TestGangLapsesStrikeGangParts(t *testing.T) {
	now := time.Now()
	s := &strikes{records: &statetest.Records{}}
	sub := wiretest.FreshParty(t).ID
	s.lapse(sub, "g1", now)
	if _, ok := s.gangStarted(sub.String()); !ok {
		t.Fatal("a started gang did not reset the lapses")
	}
	s.lapse(sub, "g2", now)
	if s.gangStruck(sub.String(), now) {
		t.Fatal("struck after one lapse since a gang started")
	}
	st := s.lapse(sub, "g3", now)
	if !s.gangStruck(sub.String(), now) || !st.GangUntil.Equal(now.Add(strikeFor)) {
		t.Fatalf("after %d lapses in a row: %+v, want its gang parts struck for %s", maxGangLapses, st, strikeFor)
	}
	if _, struck := s.struck(sub.String(), now); struck {
		t.Fatal("gang lapses struck off its other jobs too")
	}
	if s.gangStruck(sub.String(), now.Add(strikeFor)) {
		t.Fatal("the gang strike did not lift")
	}
}
