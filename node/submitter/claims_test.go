package submitter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// offersOf is an offer view holding the given offers, each seen now.
type offersOf map[string]market.Offer

func (o offersOf) Get(p string) (view.OfferEntry, bool) {
	off, ok := o[p]
	return view.OfferEntry{Offer: off, LastSeen: time.Now()}, ok
}

// offerOf is an offer of n H100s of 80 GB, UUIDs from the given prefix.
func offerOf(p peer.ID, n int, prefix string) market.Offer {
	o := market.Offer{Provider: p.String(), CPUs: 64, MemoryBytes: 512 << 30}
	for i := range n {
		o.GPUs = append(o.GPUs, market.GPU{Index: i, UUID: fmt.Sprintf("%s-%d", prefix, i), Model: "H100", MemoryBytes: 80 << 30, Free: true})
	}
	return o
}

// proposal is a proposal from prov for job j, as an honest provider makes
// it at now, for the given GPUs of its offer; edit changes the terms
// before prov signs them.
func proposal(t *testing.T, j *jobTracker, prov wiretest.Party, sub peer.ID, now time.Time, gpus []string, edit func(*wire.LeaseTerms)) []byte {
	t.Helper()
	req := j.request()
	terms := wire.LeaseTerms{
		ID: wire.LeaseID(j.id, prov.ID.String(), now.UnixMilli(), 1), Job: j.id,
		Provider: prov.ID.String(), Submitter: sub.String(), GPUs: gpus,
		CPUs: req.CPUs, MemoryBytes: uint64(req.Memory), Limit: req.Limit,
		Proposed: now.UnixMilli(), Expires: now.Add(10 * time.Second).UnixMilli(), Bound: ledger.BoundRule,
	}
	if edit != nil {
		edit(&terms)
	}
	sl := wire.SignedLease{Terms: terms}
	if err := sl.SignProvider(prov.SK); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(wire.ProposeRequest{Lease: sl})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestProposalClaimsChecked: a proposal is countersigned only from a
// provider whose offer this node holds, that fits the job, that this
// node's Match gave the job, dated now and bounded; every other is
// refused with its code, and a provider that keeps proposing what it was
// not given is avoided for the job.
func TestProposalClaimsChecked(t *testing.T) {
	now := time.Now()
	h := newHarness(t, Config{RequeueEvery: time.Hour}, nil)
	j := h.queuedJob(t, now)
	stranger, fitting, chosen, small := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	h.s.d.Offers = offersOf{
		fitting.ID.String(): offerOf(fitting.ID, 8, "F"),
		chosen.ID.String():  offerOf(chosen.ID, 8, "C"),
		small.ID.String():   offerOf(small.ID, 1, "S"),
	}
	h.s.d.Placement = placed{j.id: {chosen.ID.String()}}
	propose := func(p wiretest.Party, gpus []string, edit func(*wire.LeaseTerms)) error {
		_, err := h.s.HandleProposal(context.Background(), p.ID, proposal(t, j, p, h.sub.ID, time.Now(), gpus, edit))
		return err
	}
	for _, tc := range []struct {
		name string
		from wiretest.Party
		gpus []string
		edit func(*wire.LeaseTerms)
		want string
	}{
		{"backdated to 1970", chosen, []string{"C-0"}, func(t *wire.LeaseTerms) { t.Proposed = 0 }, wire.CodeStale},
		{"dated an hour ahead", chosen, []string{"C-0"}, func(t *wire.LeaseTerms) {
			t.Proposed = now.Add(time.Hour).UnixMilli()
			t.Expires = t.Proposed + 5000
		}, wire.CodeStale},
		{"living for a day", chosen, []string{"C-0"}, func(t *wire.LeaseTerms) { t.Expires = t.Proposed + 24*3600*1000 }, wire.CodeStale},
		{"unbounded", chosen, []string{"C-0"}, func(t *wire.LeaseTerms) { t.Bound = 0 }, wire.CodeDeclined},
		{"from a stranger without an offer", stranger, []string{"X-0"}, nil, wire.CodeNoOffer},
		{"naming a GPU not offered", chosen, []string{"F-0"}, nil, wire.CodeUnfit},
		{"asking more than its offer's price", chosen, []string{"C-0"}, func(t *wire.LeaseTerms) { t.Price = 1 }, wire.CodeUnfit},
		{"from a fitting provider Match did not choose", fitting, []string{"F-0"}, nil, wire.CodeNotAssigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := propose(tc.from, tc.gpus, tc.edit)
			if got := p2p.RefusalCode(err); got != tc.want {
				t.Fatalf("refusal %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	if st := h.job(t, j.id).State; st != api.JobQueued {
		t.Fatalf("after the refused proposals the job is %s", st)
	}
	// The provider that named a GPU it does not offer is avoided at once;
	// the fitting one Match did not choose is only refused, however often
	// it proposes: its view may differ from this node's for many passes.
	waitAvoided := func(p peer.ID) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Contains(h.job(t, j.id).Avoid, p.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s not avoided: %v", p, h.job(t, j.id).Avoid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for range 5 {
		if err := propose(fitting, []string{"F-0"}, nil); p2p.RefusalCode(err) != wire.CodeNotAssigned {
			t.Fatalf("again: %v", err)
		}
	}
	waitAvoided(chosen.ID)
	// Every avoid the refusals called for is made before the list is
	// cleared below: the chosen provider was refused five times, and an
	// avoid made after the clearing would refuse its next proposal.
	waitTasks := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.s.tasks.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitTasks()
	if avoided := h.job(t, j.id).Avoid; slices.Contains(avoided, stranger.ID.String()) {
		t.Fatalf("a stranger with no offer is avoided (%v): no Match could place the job on it anyway", avoided)
	}

	// The provider Match chose, once no longer avoided, is accepted: the
	// lease's terms are kept in the ledger before the countersignature
	// leaves.
	if err := j.update(func(r *Record) error { r.Avoid = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	raw := proposal(t, j, chosen, h.sub.ID, time.Now(), []string{"C-1"}, nil)
	rep, err := h.s.HandleProposal(context.Background(), chosen.ID, raw)
	if err != nil {
		t.Fatalf("the chosen provider's proposal: %v", err)
	}
	if len(rep.(wire.ProposeReply).SubmitterSig) == 0 {
		t.Fatal("no countersignature")
	}
	var req wire.ProposeRequest
	_ = json.Unmarshal(raw, &req)
	if _, kept := h.ledger.KeptLease(req.Lease.Terms.ID); !kept {
		t.Fatal("the lease's terms were not kept before the countersignature left")
	}
	// Every avoid the refusals called for has been made once the
	// Submitter's tasks are done: none names the unassigned provider.
	waitTasks()
	if slices.Contains(h.job(t, j.id).Avoid, fitting.ID.String()) {
		t.Fatal("a provider refused as unassigned is avoided")
	}
}

// TestProposalFromAnEpochsAssignment: without a pass on the current view
// (no Placement), a provider one of this node's recent epoch passes
// assigned the job to is accepted, as is a reserved one; after
// assignedFor passes without it, it is not.
func TestProposalFromAnEpochsAssignment(t *testing.T) {
	now := time.Now()
	h := newHarness(t, Config{RequeueEvery: time.Hour}, nil)
	j := h.queuedJob(t, now)
	p := wiretest.FreshParty(t)
	h.s.d.Offers = offersOf{p.ID.String(): offerOf(p.ID, 2, "P")}
	pass := func(to string) {
		var res market.Result
		if to != "" {
			res.Assignments = []market.Assignment{{Job: j.id, Provider: to}}
		}
		h.s.RecordWaits(res)
	}
	pass(p.ID.String())
	for range assignedFor {
		pass("")
	}
	_, err := h.s.HandleProposal(context.Background(), p.ID, proposal(t, j, p, h.sub.ID, time.Now(), []string{"P-0"}, nil))
	if p2p.RefusalCode(err) != wire.CodeNotAssigned {
		t.Fatalf("assigned %d passes ago: %v, want %s", assignedFor, err, wire.CodeNotAssigned)
	}
	pass(p.ID.String())
	pass("")
	if _, err := h.s.HandleProposal(context.Background(), p.ID, proposal(t, j, p, h.sub.ID, time.Now(), []string{"P-0"}, nil)); err != nil {
		t.Fatalf("assigned a pass ago: %v", err)
	}
}

// boundedLeasedJob is leasedJob under terms that bound the held time, the
// lease proposed at now with a one-hour limit.
func (h *harness) boundedLeasedJob(t *testing.T, now time.Time) *Record {
	t.Helper()
	r := h.leasedJob(t, now)
	j := h.s.jobs.get(r.ID)
	l := *r.Lease
	l.Terms.Bound = ledger.BoundRule
	if err := l.SignProvider(h.prov.SK); err != nil {
		t.Fatal(err)
	}
	if err := l.Countersign(h.sub.SK); err != nil {
		t.Fatal(err)
	}
	if err := j.update(func(r *Record) error { r.Lease = &l; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.ledger.KeepLease(context.Background(), l.Evidence()); err != nil {
		t.Fatal(err)
	}
	r.Lease = &l
	return r
}

// receiptOf is the provider's receipt seq of the lease, held from to until.
func (h *harness) receiptOf(t *testing.T, r *Record, seq uint64, prev string, from, until time.Time, final func(*ledger.Receipt)) ([]byte, ledger.Receipt) {
	t.Helper()
	rec := ledger.Receipt{Lease: r.Lease.Terms.ID, Job: r.ID, Provider: h.prov.ID, Submitter: h.sub.ID, GPUs: 1,
		Seq: seq, Prev: prev, HeldFrom: from, HeldUntil: until, Phase: ledger.PhaseRun}
	if final != nil {
		code := 0
		rec.Final, rec.Phase, rec.ExitCode = true, ledger.PhaseOutput, &code
		rec.Outcome, rec.Attribution = ledger.OutcomeCompleted, ledger.AttributionJob
		final(&rec)
	}
	if err := rec.SignProvider(h.prov.SK); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(wire.ReceiptRequest{Receipt: mustJSON(rec)})
	if err != nil {
		t.Fatal(err)
	}
	return raw, rec
}

// TestReceiptsWithinTheLease: held time from before the proposal, past
// the limit and its allowances, or still to come is refused; so is a
// receipt after the lease's final one.
func TestReceiptsWithinTheLease(t *testing.T) {
	proposed := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	h := newHarness(t, Config{}, noOffers{})
	r := h.boundedLeasedJob(t, proposed)
	ask := func(raw []byte) (any, error) { return h.s.HandleReceipt(context.Background(), h.prov.ID, raw) }
	end := proposed.Add(time.Hour + ledger.MaxGrace + ledger.OutputAllowance + ledger.MaxClockSkew)
	for _, tc := range []struct {
		name        string
		from, until time.Time
	}{
		{"held from 1970", time.UnixMilli(0), proposed.Add(time.Minute)},
		{"ten times the limit", proposed, proposed.Add(10 * time.Hour)},
		{"a second past the allowances", proposed, end.Add(time.Second)},
		{"held until tomorrow", proposed, time.Now().Add(24 * time.Hour)},
	} {
		raw, _ := h.receiptOf(t, r, 0, "", tc.from, tc.until, nil)
		if _, err := ask(raw); p2p.RefusalCode(err) != wire.CodeOutsideLease {
			t.Errorf("%s: %v, want %s", tc.name, err, wire.CodeOutsideLease)
		}
	}
	if n := len(h.ledger.Entries()); n != 0 {
		t.Fatalf("%d receipts stored after the refusals", n)
	}
	// Within the window, to its very end: countersigned.
	raw, rec := h.receiptOf(t, r, 0, "", proposed, end, nil)
	if _, err := ask(raw); err != nil {
		t.Fatalf("a receipt to the window's end: %v", err)
	}
	// A final one with the output this node fetched, then anything after
	// it: refused.
	out := wiretest.CID(t, "output")
	if err := h.s.jobs.get(r.ID).update(func(r *Record) error { r.Output = out; return nil }); err != nil {
		t.Fatal(err)
	}
	raw, fin := h.receiptOf(t, r, 1, rec.Digest(), proposed, end, func(f *ledger.Receipt) { f.Output = out })
	if _, err := ask(raw); err != nil {
		t.Fatalf("the final receipt: %v", err)
	}
	raw, _ = h.receiptOf(t, r, 2, fin.Digest(), proposed, end, nil)
	if _, err := ask(raw); p2p.RefusalCode(err) != wire.CodeAfterFinal {
		t.Fatalf("a receipt after the final one: %v, want %s", err, wire.CodeAfterFinal)
	}
}

// TestFalseEndingsDisputed: a final receipt that says completed without an
// output this node fetched, or names a checkpoint its provider never
// announced, is disputed, never countersigned: this node's own version
// says what it saw, both are recorded, and the job ends as this node saw
// it.
func TestFalseEndingsDisputed(t *testing.T) {
	t.Run("completed without an output", func(t *testing.T) {
		proposed := time.Now().Add(-time.Hour)
		h := newHarness(t, Config{}, noOffers{})
		r := h.boundedLeasedJob(t, proposed)
		raw, _ := h.receiptOf(t, r, 0, "", proposed, proposed.Add(10*time.Minute), func(f *ledger.Receipt) {
			f.Output = wiretest.CID(t, "never handed over")
		})
		rep, err := h.s.HandleReceipt(context.Background(), h.prov.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		ours := disputeOf(t, rep)
		if ours.Outcome != ledger.OutcomeOutputLost || ours.Attribution != ledger.AttributionProvider || ours.Output != "" {
			t.Fatalf("this node's version: %s/%s output %q", ours.Outcome, ours.Attribution, ours.Output)
		}
		if j := h.job(t, r.ID); j.Outcome == string(ledger.OutcomeCompleted) {
			t.Fatalf("the job is recorded completed: %+v", j)
		}
		if d := disputes(h); d != 1 {
			t.Fatalf("%d disputes recorded", d)
		}
	})
	t.Run("a checkpoint never announced", func(t *testing.T) {
		proposed := time.Now().Add(-time.Hour)
		h := newHarness(t, Config{}, noOffers{})
		r := h.boundedLeasedJob(t, proposed)
		ckpt := wiretest.CID(t, "checkpoint")
		raw, _ := h.receiptOf(t, r, 0, "", proposed, proposed.Add(20*time.Minute), func(f *ledger.Receipt) {
			f.Outcome, f.Attribution = ledger.OutcomePreempted, ledger.AttributionProvider
			f.Checkpoint, f.CheckpointAt = ckpt, proposed.Add(19*time.Minute)
		})
		rep, err := h.s.HandleReceipt(context.Background(), h.prov.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		if ours := disputeOf(t, rep); ours.Checkpoint != "" || !ours.CheckpointAt.IsZero() || ours.Outcome != ledger.OutcomePreempted {
			t.Fatalf("this node's version names checkpoint %q at %s (%s)", ours.Checkpoint, ours.CheckpointAt, ours.Outcome)
		}
	})
	// In a bubble: the countersignature waits preemptedCheckpointWait for
	// the pull first.
	t.Run("a checkpoint announced and still pulling", func(t *testing.T) { synctest.Test(t, stillPulling) })
}

// stillPulling is the subtest of a checkpoint announced and still being
// pulled when the final receipt naming it comes.
func stillPulling(t *testing.T) {
	proposed := time.Now().Add(-time.Hour)
	h := newHarness(t, Config{}, noOffers{})
	r := h.boundedLeasedJob(t, proposed)
	c, _ := cid.Decode(wiretest.CID(t, "checkpoint"))
	j := h.s.jobs.get(r.ID)
	at := proposed.Add(19 * time.Minute).Truncate(time.Millisecond)
	if start, err := (runPhase{j}).queueCheckpoint(r.Lease.Terms.ID, checkpointEvent{root: c, n: 1, at: at}); err != nil || !start {
		t.Fatalf("queue: %v %v", start, err)
	}
	raw, _ := h.receiptOf(t, r, 0, "", proposed, proposed.Add(20*time.Minute), func(f *ledger.Receipt) {
		f.Outcome, f.Attribution = ledger.OutcomePreempted, ledger.AttributionProvider
		f.Checkpoint, f.CheckpointAt = c.String(), at
	})
	if _, err := h.s.HandleReceipt(context.Background(), h.prov.ID, raw); p2p.RefusalCode(err) != wire.CodeBusy {
		t.Fatalf("while the checkpoint pulls: %v, want %s", err, wire.CodeBusy)
	}
	// Pulled: countersigned.
	if err := j.update(func(rec *Record) error {
		rec.Checkpoint, rec.CheckpointN, rec.CheckpointLease, rec.CheckpointAt = c.String(), 1, r.Lease.Terms.ID, at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.pulls = checkpointPulls{}
	j.mu.Unlock()
	rep, err := h.s.HandleReceipt(context.Background(), h.prov.ID, raw)
	if err != nil || len(rep.(wire.ReceiptReply).Dispute) != 0 {
		t.Fatalf("once pulled: %+v %v, want countersigned", rep, err)
	}
}

func disputeOf(t *testing.T, rep any) ledger.Receipt {
	t.Helper()
	rr, ok := rep.(wire.ReceiptReply)
	if !ok || len(rr.Dispute) == 0 {
		t.Fatalf("reply %+v, want a dispute", rep)
	}
	ours, err := ledger.DecodeReceipt(rr.Dispute)
	if err != nil {
		t.Fatal(err)
	}
	if ours.Signer != ledger.SignerSubmitter || ours.Verify() != nil {
		t.Fatalf("this node's version is not its own signed record: %+v (%v)", ours, ours.Verify())
	}
	return ours
}

func disputes(h *harness) int {
	n := 0
	for _, e := range h.ledger.Entries() {
		if e.Dispute != nil {
			n++
		}
	}
	return n
}

// TestCheckpointEventsInOrder: a lease's checkpoints are pulled one at a
// time, the latest announced next; a number not above the lease's last is
// refused before anything is fetched.
func TestCheckpointEventsInOrder(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	r := h.leasedJob(t, time.Now())
	j := h.s.jobs.get(r.ID)
	lease := r.Lease.Terms.ID
	ev := func(n int) checkpointEvent {
		c, _ := cid.Decode(wiretest.CID(t, fmt.Sprint("checkpoint ", n)))
		return checkpointEvent{root: c, n: n, at: time.Now()}
	}
	if start, err := (runPhase{j}).queueCheckpoint(lease, ev(1)); err != nil || !start {
		t.Fatalf("first: start %v, %v", start, err)
	}
	for n := 2; n <= 100; n++ {
		if start, err := (runPhase{j}).queueCheckpoint(lease, ev(n)); err != nil || start {
			t.Fatalf("checkpoint %d while one pulls: start %v, %v; want queued", n, start, err)
		}
	}
	for _, n := range []int{100, 50, 1, 0, -3} {
		if _, err := (runPhase{j}).queueCheckpoint(lease, ev(n)); p2p.RefusalCode(err) != wire.CodeCheckpointOrder {
			t.Fatalf("checkpoint %d after 100: %v, want %s", n, err, wire.CodeCheckpointOrder)
		}
	}
	j.mu.Lock()
	running, next := j.pulls.running.n, j.pulls.next.n
	j.mu.Unlock()
	if running != 1 || next != 100 {
		t.Fatalf("pulling %d, next %d; want 1 then the latest, 100", running, next)
	}
	if !(runPhase{j}).pulling(lease, ev(100).root.String()) || (runPhase{j}).pulling(lease, ev(50).root.String()) {
		t.Fatal("pulling reports other checkpoints than the one pulled and the one next")
	}
	// Another lease of the job starts its numbers afresh.
	if start, err := (runPhase{j}).queueCheckpoint("another-lease", ev(1)); err != nil || !start {
		t.Fatalf("another lease's first: %v %v", start, err)
	}
}

// A lease's price is the offer's or less, and at most the job's cap: a
// provider that offers at one price and proposes at a higher one, or at
// one over the cap, is refused as unfit.
func TestProposalPriceChecked(t *testing.T) {
	p := wiretest.FreshParty(t)
	o := offerOf(p.ID, 1, "P")
	o.Price = 2 * market.PriceUnit
	offers := offersOf{p.ID.String(): o}
	terms := wire.LeaseTerms{Provider: p.ID.String(), GPUs: []string{"P-0"}, CPUs: 1, MemoryBytes: 1 << 30}
	for _, c := range []struct {
		name       string
		price, cap market.Price
		ok         bool
	}{
		{"the offer's price", 2 * market.PriceUnit, 0, true},
		{"less than the offer's", market.PriceUnit, 0, true},
		{"more than the offer's", 3 * market.PriceUnit, 0, false},
		{"under the cap", 2 * market.PriceUnit, 2 * market.PriceUnit, true},
		{"over the cap", 2 * market.PriceUnit, market.PriceUnit, false},
	} {
		terms.Price = c.price
		err := claimCheck{}.checkOffer(offers, terms, market.Request{GPUs: 1, MaxPrice: c.cap}, time.Now())
		if (err == nil) != c.ok || err != nil && p2p.RefusalCode(err) != wire.CodeUnfit {
			t.Errorf("%s: %v, want accepted %v (or refused %s)", c.name, err, c.ok, wire.CodeUnfit)
		}
	}
}
