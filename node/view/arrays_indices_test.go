package view

import (
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// An array of listed indices is a job for each, under its own index, one
// listed task included; its cap above its tasks caps nothing, and what
// the offers hold opens its lowest indices; its re-announcement and
// withdrawal reach every listed task.
func TestArrayOfListedIndicesKeepsThem(t *testing.T) {
	sub := wiretest.FreshParty(t)
	for _, tc := range []struct {
		indices []int
		open    []int
	}{
		{[]int{3, 7, 40}, []int{3, 7}}, // four GPUs hold two tasks
		{[]int{40}, []int{40}},
	} {
		v := NewMarket()
		now := time.Now()
		b := wiretest.Declaration(t)
		b.Declaration.Array = &market.Array{Indices: tc.indices, Parallel: 100}
		s := wiretest.OnWire(t, sub, wire.KindDeclaration, b)
		if err := wire.ValidateJobMessage(s); err != nil {
			t.Fatal(err)
		}
		aj := &OpenJob{ID: wire.JobID(s), Submitter: sub.ID, Body: b, Seen: now, Signed: now, Hash: s.Hash()}
		if !v.AddJob(aj) || v.OpenCount() != len(tc.indices) {
			t.Fatalf("array of %v added: %d open", tc.indices, v.OpenCount())
		}
		at := now.Add(time.Second)
		var want []string
		for _, i := range tc.open {
			want = append(want, market.TaskID(aj.ID, i))
		}
		slices.Sort(want)
		if got := openIDs(v.Snapshot(1, at, at, fourGPUs(now))); !slices.Equal(got, want) {
			t.Fatalf("open: %v, want %v", got, want)
		}
		last := tc.indices[len(tc.indices)-1]
		task, ok := v.Job(market.TaskID(aj.ID, last))
		if !ok {
			t.Fatalf("task %d not in the view", last)
		}
		if env := task.Declaration().Work.Env; env[market.EnvTaskIndex] != wantIndex(last) {
			t.Fatalf("task %d runs with %v", last, env)
		}
		if known, _ := v.Reannounced(s.Raw, sub.ID, at); !known {
			t.Fatal("the array's re-announcement is not known")
		}
		v.CloseJob(aj.ID, sub.ID, Local(at))
		if n := v.OpenCount(); n != 0 {
			t.Fatalf("%d tasks open after the array's withdrawal", n)
		}
	}
}

func wantIndex(i int) string { return market.TaskID("", i)[1:] }
