package view

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// The checks of the jobs topic that need the view: a withdrawal counts only
// from the job's submitter, a release only from a party to its lease, and a
// requeue only with the wrapper's own declarations.
func TestJobMessagesCheckedAgainstTheView(t *testing.T) {
	sub, prov, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()

	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "input")))
	if err := NewJobChecks(v).Validate(decl); err != nil {
		t.Fatal(err)
	}
	var db wire.DeclarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	id := wire.JobID(decl)
	v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Body: db, Seen: now})

	forged := wiretest.OnWire(t, stranger, wire.KindWithdrawal, wire.WithdrawalBody{Job: id})
	if err := NewJobChecks(v).Validate(forged); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("withdrawal by a stranger: %v, want forged", err)
	}
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, sub, wire.KindWithdrawal, wire.WithdrawalBody{Job: id})); err != nil {
		t.Fatalf("withdrawal by the submitter: %v", err)
	}

	l := wiretest.SignedLease(t, prov, sub)
	v.AddLease(l, Local(now))
	r := wiretest.Release(prov.ID, sub.ID)
	r.Lease = l.Terms.ID
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, prov, wire.KindRelease, r)); err != nil {
		t.Fatalf("release by the provider: %v", err)
	}
	// A stranger naming itself as the submitter of someone else's lease.
	r2 := r
	r2.Submitter = stranger.ID.String()
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, stranger, wire.KindRelease, r2)); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("release by a stranger: %v, want forged", err)
	}

	// A requeue must carry only its signer's declarations.
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, sub, wire.KindRequeue, wire.RequeueBody{Declarations: [][]byte{decl.Raw}})); err != nil {
		t.Fatalf("requeue by the submitter: %v", err)
	}
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, stranger, wire.KindRequeue, wire.RequeueBody{Declarations: [][]byte{decl.Raw}})); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("requeue of another's declaration: %v, want forged", err)
	}
}

// An early release by strangers does not end a lease announced later.
func TestEarlyReleaseMustNameTheParties(t *testing.T) {
	sub, prov, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	l := wiretest.SignedLease(t, prov, sub)
	r := wiretest.Release(stranger.ID, sub.ID)
	r.Lease = l.Terms.ID
	v.ReleaseLease(r, stranger.ID, Local(now))
	v.AddLease(l, Local(now))
	mv := v.Snapshot(1, now.Add(time.Second), now.Add(time.Second), nil)
	if len(mv.Leases) != 1 {
		t.Fatalf("lease released by a stranger's early release: %d live", len(mv.Leases))
	}
}

// One submitter cannot make a view hold more than its share of open jobs,
// and closing or expiring jobs frees room.
func TestOpenJobsPerSubmitterBounded(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	for i := 0; i < maxOpenJobsPerSubmitter; i++ {
		if !v.AddJob(&OpenJob{ID: fmt.Sprint("j", i), Submitter: sub.ID, Seen: now}) {
			t.Fatalf("job %d refused under the bound", i)
		}
	}
	if v.AddJob(&OpenJob{ID: "over", Submitter: sub.ID, Seen: now}) {
		t.Fatal("a job over the bound was accepted")
	}
	v.CloseJob("j0", sub.ID, Local(now))
	if !v.AddJob(&OpenJob{ID: "over", Submitter: sub.ID, Seen: now}) {
		t.Fatal("closing a job did not free room")
	}
	v.Prune(now.Add(time.Hour), time.Hour, time.Minute)
	if len(v.open.jobs) != 0 {
		t.Fatalf("expired jobs still counted: %v", v.open)
	}
}

// A job closed on its submitter's refusal opens again when the submitter
// re-announces it; a withdrawn one does not.
func TestDeclinedJobReopensOnReannouncement(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewMarket()
	t0 := time.Now()
	v.AddJob(&OpenJob{ID: "declined", Submitter: sub.ID, Seen: t0})
	v.AddJob(&OpenJob{ID: "withdrawn", Submitter: sub.ID, Seen: t0})
	v.Decline("declined", sub.ID, t0.Add(time.Second))
	v.CloseJob("withdrawn", sub.ID, Local(t0.Add(time.Second)))
	if _, ok := v.Job("declined"); ok {
		t.Fatal("a declined job is still open")
	}
	// A re-announcement sent before the refusal changes nothing.
	v.AddJob(&OpenJob{ID: "declined", Submitter: sub.ID, Seen: t0.Add(500 * time.Millisecond)})
	if _, ok := v.Job("declined"); ok {
		t.Fatal("a stale re-announcement opened a declined job")
	}
	for _, id := range []string{"declined", "withdrawn"} {
		v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Seen: t0.Add(2 * time.Second)})
	}
	if _, ok := v.Job("declined"); !ok {
		t.Fatal("a declined job re-announced later is not open again")
	}
	if _, ok := v.Job("withdrawn"); ok {
		t.Fatal("a re-announcement opened a withdrawn job")
	}
	if v.open.jobs[sub.ID] != 1 {
		t.Fatalf("open count %d, want 1", v.open.jobs[sub.ID])
	}
}

// The view carries the recent use of the submitters whose jobs it holds,
// and of no one else: Match reads nothing more, and decaying every lease of
// the last hour on every pass would make each pass cost more with every job
// the network has run.
func TestUseOnlyOfSubmittersInTheView(t *testing.T) {
	prov, a, b := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	var start time.Time
	for i, sub := range []wiretest.Party{a, b} {
		l := wiretest.SignedLease(t, prov, sub)
		l.Terms.ID, l.Terms.Job = fmt.Sprint("lease-", i), fmt.Sprint("job-", i)
		start = time.UnixMilli(l.Terms.Proposed)
		v.AddLease(l, Local(start))
		r := wiretest.Release(prov.ID, sub.ID)
		r.Lease, r.Job, r.HeldMs, r.At = l.Terms.ID, l.Terms.Job, 60_000, l.Terms.Proposed+60_000
		v.ReleaseLease(r, prov.ID, Local(time.UnixMilli(r.At)))
	}
	later := start.Add(5 * time.Minute)
	declare := func(sub wiretest.Party, input string) {
		d := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, input)))
		var body wire.DeclarationBody
		if err := d.Decode(&body); err != nil {
			t.Fatal(err)
		}
		v.AddJob(&OpenJob{ID: wire.JobID(d), Submitter: sub.ID, Body: body, Seen: later, Signed: later, Hash: d.Hash()})
	}
	users := func() map[string]int64 {
		out := map[string]int64{}
		for _, u := range v.Snapshot(1, later, later, nil).Usage {
			out[u.Submitter] = u.GPUMillis
		}
		return out
	}

	if u := users(); len(u) != 0 {
		t.Fatalf("use with no job in the view: %v", u)
	}
	declare(a, "a")
	if u := users(); len(u) != 1 || u[a.ID.String()] <= 0 {
		t.Fatalf("use with a's job in the view: %v, want a's alone", u)
	}
	declare(b, "b")
	if u := users(); len(u) != 2 || u[a.ID.String()] <= 0 || u[b.ID.String()] <= 0 {
		t.Fatalf("use with both submitters' jobs in the view: %v", u)
	}
}
