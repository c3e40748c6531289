package submitter

import (
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
)

// An ended job leaves memory once endedKeep has passed; it is still
// listed, counted, found by a prefix of its ID and read whole, and a
// change made through a value taken before it left reaches the store.
func TestEndedJobLeavesMemoryAndStaysReachable(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	now := time.Now()
	ended := h.leasedJob(t, now)
	live := &Record{ID: "livejob2345678901234", Declaration: ended.Declaration, State: api.JobQueued, Submitted: now}
	if err := h.records.Put(state.PrefixJob, live.ID, live); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	stale := h.s.jobs.get(ended.ID)
	if err := stale.update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeCompleted, ledger.AttributionJob
		r.step(api.StepRelease, now)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := h.s.Counts()

	if n := h.s.jobs.evict(time.Now().Add(-time.Hour)); n != 0 {
		t.Fatalf("evicted %d jobs that ended within the keep window", n)
	}
	if n := h.s.jobs.evict(time.Now().Add(time.Second)); n != 1 {
		t.Fatalf("evicted %d jobs, want the one ended", n)
	}
	inMemory := h.s.jobs.inMemory(ended.ID) != nil
	liveInMemory := h.s.jobs.inMemory(live.ID) != nil
	if inMemory || !liveInMemory {
		t.Fatalf("in memory: ended %v, live %v; want only the live job", inMemory, liveInMemory)
	}
	if got := h.s.Counts(); got[api.JobReleased] != before[api.JobReleased] || got[api.JobQueued] != before[api.JobQueued] {
		t.Fatalf("counts %v after eviction, %v before", got, before)
	}
	jobs := h.s.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("listed %d jobs, want 2", len(jobs))
	}
	if full := h.s.FullID(ended.ID[:6]); full != ended.ID {
		t.Fatalf("prefix resolved to %q, want %q", full, ended.ID)
	}

	// A change through the value taken before eviction reaches the store.
	if err := stale.update(func(r *Record) error { r.Reason = "late news"; return nil }); err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Job(ended.ID)
	if err != nil || j.State != api.JobReleased || j.Reason != "late news" {
		t.Fatalf("Job = %+v, %v; want the released job with the late change", j, err)
	}
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, ended.ID, &r); err != nil || !ok || r.Reason != "late news" {
		t.Fatalf("stored record %+v (%v, %v), want the late change", r, ok, err)
	}
}

// A job whose last write failed stays in memory, where its truth is.
func TestDirtyJobStaysInMemory(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	ended := h.leasedJob(t, time.Now())
	j := h.s.jobs.get(ended.ID)
	h.records.FailPuts(errors.New("disk full"))
	err := j.update(func(r *Record) error {
		r.State, r.Outcome = api.JobReleased, ledger.OutcomeCompleted
		return nil
	})
	if err == nil {
		t.Fatal("update with a failing store reported no error")
	}
	if n := h.s.jobs.evict(time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("evicted a job whose record is not on disk")
	}
}
