package view

import (
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire/wiretest"
)

// A job's avoid list enters the view by the signing time of the requeue
// that named each provider, only from the job's submitter, and a job whose
// lease the submitter released as never run opens again with its next
// announcement, avoid list and all.
func TestAvoidAndRequeuedRelease(t *testing.T) {
	prov, sub, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	t0 := wiretest.Time
	lease := wiretest.SignedLease(t, prov, sub)
	job := lease.Terms.Job
	body := wiretest.Declaration(t)
	v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: body, Seen: t0, Signed: t0})
	avoidOf := func(cutoff time.Time) []string {
		mv := v.Snapshot(1, cutoff, cutoff, nil)
		i := slices.IndexFunc(mv.Jobs, func(j market.Job) bool { return j.ID == job })
		if i < 0 {
			return nil
		}
		return mv.Jobs[i].Avoid
	}
	other := wiretest.FreshParty(t).ID.String()
	forever := []time.Time{t0.Add(time.Hour)}
	v.AddAvoid(job, stranger.ID, []string{other}, forever, Local(t0.Add(time.Second)))
	if got := avoidOf(t0.Add(5 * time.Second)); got != nil {
		t.Fatalf("a stranger's avoid list counts: %v", got)
	}
	v.AddAvoid(job, sub.ID, []string{prov.ID.String()}, forever, Local(t0.Add(2*time.Second)))
	if got := avoidOf(t0.Add(time.Second)); got != nil {
		t.Fatalf("the avoid list counts before it was signed: %v", got)
	}
	if got := avoidOf(t0.Add(3 * time.Second)); !slices.Equal(got, []string{prov.ID.String()}) {
		t.Fatalf("avoid = %v, want the provider", got)
	}

	// Leased, then released by the submitter as never run.
	v.AddLease(lease, Local(t0.Add(4*time.Second)))
	if _, open := v.Job(job); open {
		t.Fatal("a leased job is still open")
	}
	r := wiretest.Release(prov.ID, sub.ID)
	r.Lease, r.Job, r.Requeued = lease.Terms.ID, job, true
	v.ReleaseLease(r, stranger.ID, Local(t0.Add(5*time.Second)))
	v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: body, Seen: t0.Add(6 * time.Second), Signed: t0.Add(6 * time.Second)})
	if _, open := v.Job(job); open {
		t.Fatal("a stranger's release opened the job")
	}
	v.ReleaseLease(r, sub.ID, Local(t0.Add(7*time.Second)))
	v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: body, Seen: t0.Add(8 * time.Second), Signed: t0.Add(8 * time.Second)})
	if _, open := v.Job(job); !open {
		t.Fatal("the job is not open again after the submitter put it back")
	}
	if got := avoidOf(t0.Add(9 * time.Second)); !slices.Equal(got, []string{prov.ID.String()}) {
		t.Fatalf("avoid after reopening = %v, want the provider", got)
	}
}

// A lease that stays unrun long enough for the view to keep only a mark of
// its job: the submitter's release as never run still lets the job's next
// announcement open it.
func TestRequeuedReleaseReopensPrunedJob(t *testing.T) {
	prov, sub, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	t0 := wiretest.Time
	lease := wiretest.SignedLease(t, prov, sub)
	job := lease.Terms.Job
	body := wiretest.Declaration(t)
	v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: body, Seen: t0, Signed: t0})
	v.AddLease(lease, Local(t0.Add(time.Second)))
	later := t0.Add(time.Second + 2*closedBodyKeep)
	v.Prune(later, time.Hour, time.Hour)
	if _, kept := v.jobs[job]; kept {
		t.Fatal("the leased job was not pruned to a mark")
	}
	r := wiretest.Release(prov.ID, sub.ID)
	r.Lease, r.Job, r.Requeued = lease.Terms.ID, job, true
	v.ReleaseLease(r, stranger.ID, Local(later.Add(time.Second)))
	if _, marked := v.closed[job]; !marked {
		t.Fatal("a stranger's release dropped the job's mark")
	}
	v.ReleaseLease(r, sub.ID, Local(later.Add(3*time.Second)))
	v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: body, Seen: later.Add(4 * time.Second), Signed: later.Add(4 * time.Second)})
	if _, open := v.Job(job); !open {
		t.Fatal("the job is not open again after the submitter put it back")
	}
}

// An avoid lifts at the time the latest-signed announcement naming the
// provider gives, by the view's Now: the same epoch on every peer, whatever
// order the announcements arrived in.
func TestAvoidLifts(t *testing.T) {
	sub, prov := wiretest.FreshParty(t), wiretest.FreshParty(t).ID.String()
	t0 := wiretest.Time
	job := "bafyreiavoidliftsjob"
	avoidAt := func(v *Market, now time.Time) []string {
		mv := v.Snapshot(1, now, now, nil)
		i := slices.IndexFunc(mv.Jobs, func(j market.Job) bool { return j.ID == job })
		if i < 0 {
			t.Fatal("the job left the view")
		}
		return mv.Jobs[i].Avoid
	}
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		v := NewMarket()
		v.AddJob(&OpenJob{ID: job, Submitter: sub.ID, Body: wiretest.Declaration(t), Seen: t0, Signed: t0})
		// First avoided until t0+1m; named again at t0+30s, until t0+5m.
		ann := []struct {
			until time.Time
			at    time.Time
		}{{t0.Add(time.Minute), t0.Add(time.Second)}, {t0.Add(5 * time.Minute), t0.Add(30 * time.Second)}}
		for _, k := range order {
			v.AddAvoid(job, sub.ID, []string{prov}, []time.Time{ann[k].until}, Local(ann[k].at))
		}
		if got := avoidAt(v, t0.Add(2*time.Second)); !slices.Equal(got, []string{prov}) {
			t.Fatalf("order %v: avoid at t0+2s = %v, want the provider", order, got)
		}
		if got := avoidAt(v, t0.Add(2*time.Minute)); !slices.Equal(got, []string{prov}) {
			t.Fatalf("order %v: avoid at t0+2m = %v, want it renewed to t0+5m", order, got)
		}
		if got := avoidAt(v, t0.Add(5*time.Minute)); got != nil {
			t.Fatalf("order %v: avoid at t0+5m = %v, want it lifted", order, got)
		}
	}
}
