package submitter

import (
	"context"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// WaitJob answers at once for a version the client has not seen, at the
// job's next change for the version it has, with the job as it is when its
// context ends, and at once for an ended job.
func TestWaitJobAnswersAtTheNextChange(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	rec := h.leasedJob(t, time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j0, err := h.s.Job(rec.ID)
	if err != nil {
		t.Fatal(err)
	}

	got, err := h.s.WaitJob(ctx, rec.ID, j0.Version+1)
	if err != nil || got.Version != j0.Version {
		t.Fatalf("WaitJob for an unseen version = version %d, %v; want %d at once", got.Version, err, j0.Version)
	}

	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	got, err = h.s.WaitJob(short, rec.ID, j0.Version)
	cancelShort()
	if err != nil || got.Version != j0.Version || got.State != api.JobRunning {
		t.Fatalf("WaitJob with no change = %+v, %v; want the job as it is, no error", got, err)
	}

	done := make(chan api.Job, 1)
	go func() {
		j, err := h.s.WaitJob(ctx, rec.ID, j0.Version)
		if err != nil {
			t.Error(err)
		}
		done <- j
	}()
	// Change the job only once the waiter waits on it, so that it is the
	// change that wakes it and not the version it finds.
	for {
		waiting := false
		if j := h.s.jobs.inMemory(rec.ID); j != nil {
			j.mu.Lock()
			waiting = j.changed != nil
			j.mu.Unlock()
		}
		if waiting {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waiter never waited")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.s.jobs.get(rec.ID).update(func(r *Record) error { r.Reason = "news"; return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("the change did not wake the waiter")
	}
	if got.Version != j0.Version+1 || got.Reason != "news" {
		t.Fatalf("woken with version %d, reason %q; want %d, %q", got.Version, got.Reason, j0.Version+1, "news")
	}

	if err := h.s.jobs.get(rec.ID).update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeCompleted, ledger.AttributionJob
		r.step(api.StepRelease, time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	end, err := h.s.Job(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err = h.s.WaitJob(ctx, rec.ID, end.Version)
	if err != nil || got.State != api.JobReleased || ctx.Err() != nil {
		t.Fatalf("WaitJob on an ended job = %s, %v (ctx %v); want it at once", got.State, err, ctx.Err())
	}
}

// A new Match reason is a change a follower hears of; the same reason again
// is not.
func TestWaitReasonIsAChange(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	rec := h.leasedJob(t, time.Now())
	j := h.s.jobs.inMemory(rec.ID)
	j.mu.Lock()
	j.rec.State = api.JobQueued
	v := j.version
	j.mu.Unlock()

	res := func(why string) market.Result {
		return market.Result{Waiting: []market.Wait{{Job: rec.ID, Reason: why}}}
	}
	h.s.RecordWaits(res("no provider has 8 free GPUs"))
	h.s.RecordWaits(res("no provider has 8 free GPUs"))
	j.mu.Lock()
	got := j.version
	j.mu.Unlock()
	if got != v+1 {
		t.Fatalf("version %d after one new reason given twice, want %d", got, v+1)
	}
}
