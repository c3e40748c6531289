package view

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// A job and its lease long ended are kept only as small marks, and the
// marks answer as the whole records did: a late copy of the declaration
// stays closed, a forged lease or withdrawal of the job is still caught,
// the lease's parties are still known, and the submitter's recent use is
// the same to the millisecond.
func TestPruneKeepsWhatLongEndedJobsAnswer(t *testing.T) {
	sub, prov, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "input")))
	var db wire.DeclarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	id := wire.JobID(decl)
	l := wiretest.SignedLease(t, prov, sub)
	l.Terms.Job = id
	if err := l.SignProvider(prov.SK); err != nil {
		t.Fatal(err)
	}
	if err := l.Countersign(sub.SK); err != nil {
		t.Fatal(err)
	}
	start := time.UnixMilli(l.Terms.Proposed)
	v := NewMarket()
	v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Body: db, Seen: start, Signed: start, Hash: decl.Hash()})
	v.AddLease(l, Local(start))
	r := wiretest.Release(prov.ID, sub.ID)
	r.Lease, r.Job, r.HeldMs, r.At = l.Terms.ID, id, 90_000, l.Terms.Proposed+90_000
	released := time.UnixMilli(r.At)
	v.ReleaseLease(r, prov.ID, Local(released))

	later := released.Add(10 * time.Minute)
	// Another job of the same submitter, queued: its submitter's use is
	// what the view carries for Match.
	queued := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "other input")))
	var qb wire.DeclarationBody
	if err := queued.Decode(&qb); err != nil {
		t.Fatal(err)
	}
	v.AddJob(&OpenJob{ID: wire.JobID(queued), Submitter: sub.ID, Body: qb, Seen: later, Signed: later, Hash: queued.Hash()})
	before := v.Snapshot(1, later, later, nil)
	v.Prune(later, time.Hour, time.Hour)
	if _, ok := v.jobs[id]; ok || len(v.jobs) != 1 {
		t.Fatalf("%d job entries kept, the leased one among them: want only a mark for it %s after the lease", len(v.jobs), closedBodyKeep)
	}
	if kl := v.leases[l.Terms.ID]; kl == nil || kl.lease.ProviderSig != nil || kl.lease.Terms.GPUs != nil {
		t.Fatalf("released lease kept whole: %+v", kl)
	}
	after := v.Snapshot(1, later, later, nil)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("pruning changed the view:\n%+v\n%+v", before, after)
	}
	if len(after.Usage) != 1 || after.Usage[0].GPUMillis == 0 {
		t.Fatalf("recent use lost: %+v", after.Usage)
	}

	if v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Body: db, Seen: later, Signed: start, Hash: decl.Hash()}) {
		t.Fatal("a late copy of a leased job's declaration opened it again")
	}
	if p, s, ok := v.LeaseParties(l.Terms.ID); !ok || p != prov.ID.String() || s != sub.ID.String() {
		t.Fatalf("lease parties after pruning: %q %q %v", p, s, ok)
	}
	v.Prune(later.Add(time.Minute), time.Hour, time.Hour)
	if got, ok := v.SubmitterOf(id); !ok || got != sub.ID {
		t.Fatalf("submitter of a long-closed job: %s %v", got, ok)
	}
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, stranger, wire.KindWithdrawal, wire.WithdrawalBody{Job: id})); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("withdrawal of a long-closed job by a stranger: %v, want forged", err)
	}

	// A mark made by the closer's word alone names no declarer.
	v.CloseJob("never-declared", stranger.ID, Local(later))
	if _, ok := v.SubmitterOf("never-declared"); ok {
		t.Fatal("a withdrawal's signer taken for the declarer of a job never seen")
	}
}

// Once a burst of jobs is pruned to marks, the jobs map is made anew, so
// that the room it grew to goes back; the jobs still open stay.
func TestPruneShrinksTheJobsMapAfterABurst(t *testing.T) {
	sub := wiretest.FreshParty(t)
	now := time.Now()
	v := NewMarket()
	for i := range 4 * shrinkAbove {
		id := "job-" + strconv.Itoa(i)
		v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Seen: now, Signed: now})
		if i > 0 {
			v.CloseJob(id, sub.ID, Local(now))
		}
	}
	v.Prune(now, time.Hour, time.Hour) // the burst, not yet prunable
	v.Prune(now.Add(2*closedBodyKeep), time.Hour, time.Hour)
	if n, peak := len(v.jobs), v.jobsPeak; n != 1 || peak != 1 {
		t.Fatalf("after the burst: %d jobs, peak %d; want the open one alone", n, peak)
	}
	if _, ok := v.Job("job-0"); !ok {
		t.Fatal("the open job was lost when the map was made anew")
	}
}
