package rogue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// pair starts two rogues on loopback, connected and on both topics: one
// to play the submitter, one the provider.
func pair(t *testing.T) (sub, prov *Rogue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cfg := Config{Network: "rogue-test", ReceiptInterval: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Epoch: 250 * time.Millisecond}
	var err error
	if sub, err = New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	if prov, err = New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	if err := prov.Connect(ctx, sub.Addrs()...); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Rogue{sub, prov} {
		if err := r.Joined(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return sub, prov
}

// A declaration one rogue gossips reaches the other, whose proposal the
// first countersigns; receipts then extend the chain while countersigned,
// and leave it as it was when refused.
func TestProposalAndReceiptsBetweenRogues(t *testing.T) {
	sub, prov := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub.Serve(SubmitterPolicy{Receipts: Countersign})
	d := market.NewDeclaration("probe", []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	d.Request.GPUModel = "ROGUE-X"
	if err := prov.Offer(ctx, prov.GPUs("ROGUE-X", 2, 80<<30)); err != nil {
		t.Fatal(err)
	}
	// Gossip may drop a message published before the mesh formed: the
	// requeue loop announces the job again every heartbeat.
	j, err := sub.Declare(ctx, d, true)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := prov.WaitJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Submitter != sub.ID() || seen.Request().GPUModel != "ROGUE-X" {
		t.Fatalf("the provider saw job %s from %s asking %+v", seen.ID, seen.Submitter, seen.Request())
	}
	l, err := prov.Propose(ctx, seen, Terms{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Signed.Terms.GPUs; len(got) != 1 || !strings.HasPrefix(got[0], "GPU-rogue-") {
		t.Fatalf("proposed GPUs %v, want one of the offer's", got)
	}
	if _, err := prov.Propose(ctx, seen, Terms{}); p2p.RefusalCode(err) != wire.CodeNotQueued {
		t.Fatalf("a second proposal for the job: %v, want %s", err, wire.CodeNotQueued)
	}
	for seq := range 2 {
		a := l.Receipt(ctx, ReceiptSpec{})
		if !a.Countersigned || a.Receipt.Seq != uint64(seq) || a.Receipt.Verify() != nil {
			t.Fatalf("receipt %d: %+v", seq, a)
		}
	}
	sub.Serve(SubmitterPolicy{Receipts: Refuse})
	a := l.Receipt(ctx, ReceiptSpec{Final: true, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob})
	if a.Countersigned || a.Err == nil || errors.Is(a.Err, ErrNoAnswer) || a.Receipt.Seq != 2 {
		t.Fatalf("a refused final receipt: %+v", a)
	}
	held := sub.Leases(seen.ID)
	if len(held) != 1 || held[0].Signed != 2 || held[0].Refused != 1 || held[0].Final == nil {
		t.Fatalf("the submitter's lease: %+v", held)
	}
	if l.Ended() {
		t.Fatal("a refused final receipt ended the lease on the provider's side")
	}
}

// A rogue with no offer names made-up GPUs, as many as the job asks for,
// and a backdated proposal carries the times it was given.
func TestProposalTermsAsGiven(t *testing.T) {
	sub, prov := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub.Serve(SubmitterPolicy{Receipts: Countersign})
	d := market.NewDeclaration("two", []string{"true"}, 2, market.Duration(time.Hour.Milliseconds()), nil)
	j, err := sub.Declare(ctx, d, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := prov.Backdated(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The rogue submitter believes everything: the proposal and the
	// receipt from 1970 are countersigned, which is what the attack wins
	// from a submitter with no defences.
	if s, _ := res.Step("proposal dated 1970"); s.Answer != Countersigned {
		t.Fatalf("steps %+v", res.Steps)
	}
	held := sub.Leases(j.ID)
	if len(held) != 1 || held[0].Lease.Terms.Proposed != 0 || len(held[0].Lease.Terms.GPUs) != 2 {
		t.Fatalf("the lease: %+v", held)
	}
	if want := 2 * time.Since(time.UnixMilli(0)).Hours(); res.GPUHours < want-1 || res.GPUHours > want+1 {
		t.Fatalf("%v GPU-hours countersigned, want about %v", res.GPUHours, want)
	}
}

// A Result's summary counts steps of one name and answer together, names
// refusal codes, and writes GPU-hours with separators.
func TestResultSummary(t *testing.T) {
	r := Result{Attack: AttackCheckpointFlood, GPUHours: 499063.2}
	for range 3 {
		r.Steps = append(r.Steps, Step{What: "checkpoint event", Answer: Refused, Code: wire.CodeBusy})
	}
	r.Steps = append(r.Steps, Step{What: "checkpoint event", Answer: Accepted}, Step{What: "receipt", Answer: Refused, Err: "call: peer says: not now"},
		Step{What: "parts", Answer: Counted, Count: 2, Err: "round 1: 2"}, Step{What: "parts", Answer: Counted, Err: "round 2: 0"})
	r.note("0 B served")
	want := "checkpoint event ×3: refused busy; checkpoint event: accepted; receipt: refused, no code (not now); parts: round 1: 2; parts: round 2: 0; 499,063 GPU-hours countersigned; 0 B served"
	if got := r.Summary(); got != want {
		t.Fatalf("summary\n%s\nwant\n%s", got, want)
	}
	if c := r.Codes(); c["refused:busy"] != 3 || c[Accepted] != 1 || c["refused:"] != 1 || c[Counted] != 2 {
		t.Fatalf("codes %v", c)
	}
}

// How a request was answered: a refusal with its code, a refusal without
// one, and no answer at all are told apart.
func TestStepOf(t *testing.T) {
	for _, c := range []struct {
		err          error
		answer, code string
	}{
		{nil, Countersigned, ""},
		{&p2p.RemoteError{Code: wire.CodeStale, Msg: "stale"}, Refused, wire.CodeStale},
		{fmt.Errorf("call: %w", &p2p.RemoteError{Msg: "no"}), Refused, ""},
		{answerErr(errors.New("stream reset")), NoAnswer, ""},
	} {
		s := stepOf("x", c.err, Countersigned)
		if s.Answer != c.answer || s.Code != c.code {
			t.Errorf("%v: %+v, want %s %q", c.err, s, c.answer, c.code)
		}
	}
}

// Escapes counts the ESC and BEL bytes a reader printed.
func TestEscapes(t *testing.T) {
	r := Escapes([]byte("PEER  "+EscapeModel+"\n"), true)
	if s := r.Summary(); !strings.Contains(s, "1 ESC and 1 BEL") {
		t.Fatalf("summary %q", s)
	}
}
