package submitter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire/wiretest"
)

// An array whose checks are all over is not over while tasks it holds
// completed on a provider a check has just caught and are not yet run
// again: between the verdict and the verifier's next round (which runs
// them again) its view says so, rather than released with the caught
// provider's outputs as the array's. A task checked by other runs shows
// the check in its own view.
func TestSpotArrayWaitsForACaughtProvidersTasks(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	d := market.NewDeclaration("sweep", []string{"sim"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: 2}
	d.Verify = &market.Verify{Spot: 0.5}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := wiretest.SignedLease(t, h.prov, h.sub)
	for i := range 2 {
		if err := h.s.jobs.get(market.TaskID(j.ID, i)).update(func(r *Record) error {
			r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeCompleted, ""
			r.Lease, r.Spot = &l, spotPass
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.job(t, j.ID); got.State != api.JobReleased || got.Verification == nil || got.Verification.State != verdictAgreed {
		t.Fatalf("every task passed, nothing caught: the array is %s, verification %+v", got.State, got.Verification)
	}

	h.s.verify.distrust.add(context.Background(), h.prov.ID.String(), market.TaskID(j.ID, 0), time.Now())
	got := h.job(t, j.ID)
	if got.State.Terminal() || !strings.Contains(got.Reason, "2 tasks of a caught provider to run again") {
		t.Fatalf("with its provider caught and its tasks not run again, the array is %s: %q", got.State, got.Reason)
	}

	// A task drawn for a check, with the check's runs: the task's own
	// state, and the check beside it.
	task, check := market.TaskID(j.ID, 1), "check-of-1"
	if err := h.s.jobs.get(task).update(func(r *Record) error {
		r.Spot, r.Replicas = spotCheck, []string{check}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := h.job(t, market.TaskID(j.ID, 0)).Verification; v != nil {
		t.Fatalf("a task not drawn shows a check: %+v", v)
	}
	tv := h.job(t, task)
	if tv.State != api.JobReleased || tv.Verification == nil || tv.Verification.Mode != "output" {
		t.Fatalf("the checked task is %s with verification %+v", tv.State, tv.Verification)
	}
}

// An array run as replicas is viewed as an array: its tasks counted and
// its checks beside them, not as one job waiting for its replicas.
func TestReplicatedArrayIsViewedAsAnArray(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	d := market.NewDeclaration("sweep", []string{"sim"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: 3}
	d.Verify = &market.Verify{Replicas: 2}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := h.job(t, j.ID)
	if got.Tasks == nil || got.Tasks.Total != 3 || got.Verification == nil || got.Verification.Checks != 3 {
		t.Fatalf("an array of 3 tasks run as replicas is viewed with tasks %+v, verification %+v", got.Tasks, got.Verification)
	}
	if tv := h.job(t, market.TaskID(j.ID, 0)).Verification; tv == nil || len(tv.Replicas) != 2 {
		t.Fatalf("task 0 of an array run as replicas shows the check %+v, want its 2 runs", tv)
	}
}
