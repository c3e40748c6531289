package submitter

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
)

// submitArray submits an array of the given indices (0 to n-1 when nil)
// with max_failures bound, and returns its ID.
func submitArray(t *testing.T, h *harness, count int, indices []int, bound int) string {
	t.Helper()
	d := market.NewDeclaration("sweep", []string{"sim"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: count, Indices: indices, MaxFailures: bound}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// setTask puts the task of index i of array in state st, ended as
// outcome when it is terminal.
func setTask(t *testing.T, h *harness, array string, i int, st api.JobState, outcome ledger.Outcome) {
	t.Helper()
	tj := h.s.jobs.get(market.TaskID(array, i))
	if tj == nil {
		t.Fatalf("no task %d of %s", i, array)
	}
	if err := tj.update(func(r *Record) error {
		r.State, r.Outcome = st, outcome
		if outcome != "" {
			r.Attribution = ledger.AttributionJob
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The tasks of an array of listed indices keep their indices: their IDs,
// records and E31_TASK_INDEX, and the array's counts name them; the
// bound on failures stays on this node, out of the signed declaration.
func TestArrayOfListedIndices(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	id := submitArray(t, h, 0, []int{3, 7, 40}, 2)
	for _, i := range []int{3, 7, 40} {
		task := h.job(t, market.TaskID(id, i))
		if task.Array != id || task.Index != i {
			t.Fatalf("task %d: array %q index %d", i, task.Array, task.Index)
		}
		var r Record
		if ok, err := h.records.Get(state.PrefixJob, task.ID, &r); !ok || err != nil {
			t.Fatalf("record of %s: %v %v", task.ID, ok, err)
		}
		if got := r.Declaration.Work.Env[market.EnvTaskIndex]; got != strconv.Itoa(i) {
			t.Fatalf("task %d runs with %s=%s", i, market.EnvTaskIndex, got)
		}
	}
	if _, err := h.s.Job(market.TaskID(id, 0)); err == nil {
		t.Fatal("task 0 of an array of 3,7,40 exists")
	}
	j := h.job(t, id)
	if j.Tasks == nil || j.Tasks.Total != 3 || !slices.Equal(j.Tasks.Indices, []int{3, 7, 40}) {
		t.Fatalf("array's tasks: %+v", j.Tasks)
	}
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, id, &r); !ok || err != nil {
		t.Fatalf("record of %s: %v %v", id, ok, err)
	}
	if r.MaxFailures != 2 || strings.Contains(string(r.Envelope), "max_failures") || !strings.Contains(string(r.Envelope), "indices") {
		t.Fatalf("record: max_failures %d, envelope %s", r.MaxFailures, r.Envelope)
	}
}

// An array stops at its max_failures-th failed task: the queued tasks are
// withdrawn, the running one runs on, and once it ends the array is
// failed with a reason naming the count. Below the bound nothing is
// stopped.
func TestArrayStopsAtMaxFailures(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	id := submitArray(t, h, 0, []int{1, 2, 5, 8, 9}, 2)
	a := arrayRun{h.s.kit, h.s.jobs.get(id)}
	setTask(t, h, id, 1, api.JobReleased, ledger.OutcomeFailed)
	setTask(t, h, id, 5, api.JobRunning, "")
	setTask(t, h, id, 8, api.JobRenting, "")
	if _, err := a.stopIfFailing(ctx); err != nil {
		t.Fatal(err)
	}
	if j := h.job(t, id); j.Tasks.Withdrawn != 0 || j.Tasks.Queued != 3 || j.Tasks.Running != 1 {
		t.Fatalf("below the bound: %+v", j.Tasks)
	}
	withdrawals := h.gossip.count(wire.KindWithdrawal)
	setTask(t, h, id, 2, api.JobReleased, ledger.OutcomeFailed)
	if _, err := a.stopIfFailing(ctx); err != nil {
		t.Fatal(err)
	}
	j := h.job(t, id)
	if j.Tasks.Withdrawn != 1 || j.Tasks.Running != 1 || j.Tasks.Queued != 1 || j.Tasks.Failed != 2 || j.State != api.JobRunning {
		t.Fatalf("at the bound: %s %+v", j.State, j.Tasks)
	}
	// The task being leased is left to run, as the running one is.
	for i, want := range map[int]api.JobState{5: api.JobRunning, 8: api.JobRenting, 9: api.JobWithdrawn} {
		if task := h.job(t, market.TaskID(id, i)); task.State != want {
			t.Fatalf("task %d: %s, want %s", i, task.State, want)
		}
	}
	if n := h.gossip.count(wire.KindWithdrawal); n != withdrawals+1 {
		t.Fatalf("withdrawals announced: %d, want one for the array", n-withdrawals)
	}
	// Once: a task run again later is left to run.
	setTask(t, h, id, 1, api.JobQueued, "")
	if _, err := a.stopIfFailing(ctx); err != nil {
		t.Fatal(err)
	}
	if task := h.job(t, market.TaskID(id, 1)); task.State != api.JobQueued {
		t.Fatalf("a task run again after the stop: %s", task.State)
	}
	setTask(t, h, id, 1, api.JobReleased, ledger.OutcomeFailed)
	setTask(t, h, id, 5, api.JobReleased, ledger.OutcomeFailed)
	setTask(t, h, id, 8, api.JobReleased, ledger.OutcomeCompleted)
	j = h.job(t, id)
	want := "stopped at its max_failures, 2 failed tasks: 3 of 5 tasks failed, 1 withdrawn"
	if j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeFailed) || j.Reason != want || !slices.Equal(j.Tasks.FailedIndices, []int{1, 2, 5}) {
		t.Fatalf("ended: %s %s %q, failed %v; want reason %q", j.State, j.Outcome, j.Reason, j.Tasks.FailedIndices, want)
	}
}

// The watcher of an array stops it as the failure that reaches its bound
// is recorded, with no tick to wait for, and then goes.
func TestArrayWatchStopsAtTheFailure(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := submitArray(t, h, 6, nil, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		arrayRun{h.s.kit, h.s.jobs.get(id)}.watchFailures(ctx)
	}()
	setTask(t, h, id, 4, api.JobReleased, ledger.OutcomeFailed)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the watcher did not stop the array at its first failure")
	}
	if j := h.job(t, id); j.Tasks.Withdrawn != 5 || j.Tasks.Failed != 1 || j.Outcome != string(ledger.OutcomeFailed) {
		t.Fatalf("after the watcher: %s %+v", j.Outcome, j.Tasks)
	}
}

// A stop cut short by a restart, marked but not done, is finished: the
// queued tasks are withdrawn then, though no task has failed since.
func TestArrayStopFinishedAfterARestart(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	id := submitArray(t, h, 3, nil, 1)
	if err := h.s.jobs.get(id).update(func(r *Record) error { r.Stopped = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	stopped, err := arrayRun{h.s.kit, h.s.jobs.get(id)}.stopIfFailing(context.Background())
	if err != nil || !stopped {
		t.Fatalf("stopIfFailing: %v, %v", stopped, err)
	}
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, id, &r); !ok || err != nil || !r.StopDone {
		t.Fatalf("record of %s: done %v, %v %v", id, r.StopDone, ok, err)
	}
	if j := h.job(t, id); j.Tasks.Withdrawn != 3 {
		t.Fatalf("after the stop was finished: %+v", j.Tasks)
	}
}
