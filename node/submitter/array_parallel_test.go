package submitter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// An array capped at P tasks at once accepts a task's lease only while
// fewer than P of its tasks hold one, whatever the views placed: the
// views learn of a task's lease only from the next task batch.
func TestArrayParallelCapAtTheSubmitter(t *testing.T) {
	h := newHarness(t, Config{RequeueEvery: time.Hour}, nil)
	d := market.NewDeclaration("capped", []string{"true"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: 4, Parallel: 2}
	raw, _ := json.Marshal(d)
	arr, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	propose := func(i int) error {
		j := h.s.jobs.get(market.TaskID(arr.ID, i))
		rec := j.snapshot()
		sl := wiretest.SignedLease(t, h.prov, h.sub)
		sl.Terms.Job, sl.Terms.Proposed = j.id, time.Now().UnixMilli()
		sl.Terms.ID = wire.LeaseID(j.id, h.prov.ID.String(), sl.Terms.Proposed, uint64(i))
		sl.Terms.GPUs = sl.Terms.GPUs[:rec.Declaration.Request.GPUs]
		sl.Terms.CPUs, sl.Terms.MemoryBytes, sl.Terms.Limit = rec.Declaration.Request.CPUs, uint64(rec.Declaration.Request.Memory), rec.Declaration.Request.Limit
		if err := sl.SignProvider(h.prov.SK); err != nil {
			t.Fatal(err)
		}
		_, err := j.propose(h.prov.ID, sl)
		return err
	}
	for i := range 2 {
		if err := propose(i); err != nil {
			t.Fatalf("task %d, under the cap: %v", i, err)
		}
	}
	if err := propose(2); p2p.RefusalCode(err) != wire.CodeDeclined {
		t.Fatalf("task 2, at the cap of 2: %v, want refused %s", err, wire.CodeDeclined)
	}
	if st := h.job(t, market.TaskID(arr.ID, 2)).State; st != api.JobQueued {
		t.Fatalf("task 2 refused is %s, want queued", st)
	}
	h.endAttempt(t, market.TaskID(arr.ID, 0), "")
	if err := propose(2); err != nil {
		t.Fatalf("task 2, once task 0 ended: %v", err)
	}
}
