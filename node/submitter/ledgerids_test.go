package submitter

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// A pipeline's array stage is held, then announced under an ID of its
// own, and a task run again gets an ID of its own too: the ID the user was
// shown finds them all, and ID.N of the held array names the task.
func TestLedgerJobsOfAHeldArray(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	up, err := h.submitDecl(t, market.NewDeclaration("prepare", []string{"true"}, 1, market.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("sweep", []string{"true"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: 3}
	d.After = []string{up.ID}
	held, err := h.submitDecl(t, d)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := h.s.LedgerJobs(held.ID); err != nil || len(ids.IDs) != 0 || ids.ID != held.ID {
		t.Fatalf("a held array not yet released: %+v, %v", ids, err)
	}
	h.end(t, up.ID, ledger.OutcomeCompleted, ledger.AttributionJob)
	heldOf(h.s.kit, h.s.jobs.get(held.ID)).release(ctx)
	j := h.job(t, held.ID)
	if j.Tasks == nil || j.Tasks.ID == held.ID {
		t.Fatalf("released: %+v", j.Tasks)
	}
	array := j.Tasks.ID

	// Task 1 fails by its own fault and is run again by hand: a new
	// attempt under a new ID.
	task1 := market.TaskID(array, 1)
	h.end(t, task1, ledger.OutcomeFailed, ledger.AttributionJob)
	if _, err := h.s.kit.resumeChain(ctx, task1, true, false); err != nil {
		t.Fatal(err)
	}
	again := h.job(t, task1).Attempts
	if len(again) != 2 || again[1].ID == task1 {
		t.Fatalf("task 1's attempts: %+v", again)
	}

	ids, err := h.s.LedgerJobs(held.ID[:8])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{array, market.TaskID(array, 0), task1, again[1].ID, market.TaskID(array, 2)}
	if ids.ID != held.ID || !slices.Equal(ids.IDs, want) {
		t.Fatalf("ledger IDs of %s: %+v, want %v", held.ID, ids, want)
	}
	if len(ids.Tasks) != 3 || !slices.Equal(ids.Tasks[1].IDs, []string{task1, again[1].ID}) || ids.Tasks[1].State != api.JobQueued {
		t.Fatalf("tasks: %+v", ids.Tasks)
	}
	// The array's own ID finds the same.
	if byArray, err := h.s.LedgerJobs(array); err != nil || !slices.Equal(byArray.IDs, want) {
		t.Fatalf("by the array's ID: %+v, %v", byArray, err)
	}

	// HELD.1 names task 1, through its attempts; an attempt's own ID,
	// that attempt alone.
	shown := market.TaskID(held.ID, 1)
	if ids, err := h.s.LedgerJobs(shown); err != nil || !slices.Equal(ids.IDs, []string{task1, again[1].ID}) {
		t.Fatalf("%s: %+v, %v", shown, ids, err)
	}
	if got, err := h.s.Job(shown); err != nil || got.ID != task1 || len(got.Attempts) != 2 {
		t.Fatalf("status %s: %s %+v, %v", shown, got.ID, got.Attempts, err)
	}
	if full := h.s.FullID(shown); full != task1 {
		t.Fatalf("FullID(%s) = %s, want %s", shown, full, task1)
	}
	if ids, err := h.s.LedgerJobs(again[1].ID); err != nil || !slices.Equal(ids.IDs, []string{again[1].ID}) {
		t.Fatalf("an attempt by its own ID: %+v, %v", ids, err)
	}
	if _, err := h.s.LedgerJobs(market.TaskID(held.ID, 7)); err == nil {
		t.Fatal("a task the array does not have was found")
	}
	if _, err := h.s.LedgerJobs(market.TaskID(up.ID, 0)); err == nil {
		t.Fatal("a task of a job that is no array was found")
	}
}
