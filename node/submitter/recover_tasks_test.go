package submitter

import (
	"maps"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// Recover tells the node which of its arrays' tasks a previous run leased
// or saw end, so that its view, empty at the start, does not hold them
// open: the ended with when they ended, the leased with their lease; not
// the queued, nor a task's later attempt (announced on its own).
func TestRecoverTellsTheTasksNotQueued(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	told := map[string]string{}
	var endedAt time.Time
	deps := h.s.d
	deps.TaskNotQueued = func(task string, lease *wire.SignedLease, at time.Time) {
		switch {
		case lease != nil:
			told[task] = "leased " + lease.Terms.ID
		default:
			told[task] = "ended"
			endedAt = at
		}
	}
	s := New(Config{}, deps)
	d := market.NewDeclaration("sweep", []string{"true"}, 1, market.Hour, nil)
	now := time.Now().Truncate(time.Millisecond)
	l := wiretest.SignedLease(t, h.prov, h.sub)
	put := func(r *Record) {
		t.Helper()
		r.Declaration, r.Submitted = d, now.Add(-time.Minute)
		r.step(api.StepSubmit, r.Submitted)
		if r.State == api.JobReleased {
			r.step(api.StepRelease, now)
		}
		if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
			t.Fatal(err)
		}
	}
	put(&Record{ID: market.TaskID("arr", 0), State: api.JobReleased, Outcome: ledger.OutcomeCompleted})
	put(&Record{ID: market.TaskID("arr", 1), State: api.JobRunning, Lease: &l})
	put(&Record{ID: market.TaskID("arr", 2), State: api.JobQueued})
	put(&Record{ID: "attempt2", State: api.JobReleased, Outcome: ledger.OutcomeCompleted, RecordChain: RecordChain{Root: market.TaskID("arr", 3)}})
	if err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{market.TaskID("arr", 0): "ended", market.TaskID("arr", 1): "leased " + l.Terms.ID}
	if !maps.Equal(told, want) || !endedAt.Equal(now) {
		t.Fatalf("told %v (ended at %s), want %v (at %s)", told, endedAt, want, now)
	}
}
