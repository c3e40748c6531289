package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// TestLocalityPrefersHolder: a job goes to the provider that already holds
// its input, even where best fit alone would send it to another provider
// that is free; a job that declares a locality wait waits for the holder,
// saying so, while the other provider is free; and a job that turns
// locality off goes by best fit.
//
// node1 has two GPUs, node2 one. The first job needs both of node1's, so
// it stages the input there. A one-GPU job reading the same input then
// fits node2 exactly (no device left over), which best fit prefers; only
// locality sends it to node1.
func TestLocalityPrefersHolder(t *testing.T) {
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		// Placement is the epoch's Match's alone, for determinism; the
		// pass between epochs follows the same rule.
		Args: []string{"--epoch", "250ms", "--no-fast-path"},
	})
	keepLogsOnFailure(t, c)
	sub := c.Client(0)
	holder, other := c.Nodes[1].PeerID, c.Nodes[2].PeerID

	in, _ := randomInput(t, "shard", 4<<20)
	reads := func(name string, gpus int) market.Declaration {
		d := decl(name, "cat /data/shard > /dev/null && echo read", gpus, time.Minute)
		d.Data = []market.Input{{Source: in, Mount: "/data"}}
		return d
	}

	j1 := submit(t, sub, reads("stage", 2))
	j1 = waitJob(t, sub, j1.ID, 60*time.Second, "release", released)
	if j1.Provider != holder || j1.Outcome != "completed" {
		t.Fatalf("first job: provider %s outcome %s, want %s completed", j1.Provider, j1.Outcome, holder)
	}
	if len(j1.Inputs) != 1 {
		t.Fatalf("first job inputs %v", j1.Inputs)
	}
	root := j1.Inputs[0]

	// The holder's offer, as the submitter's view has it, names the input.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ns, err := sub.Nodes(ctx)
		if err == nil && slices.ContainsFunc(ns, func(n api.Node) bool {
			return n.PeerID == holder && slices.ContainsFunc(n.Held, func(h api.HeldRoot) bool { return h.Root == root && h.Size >= 4<<20 })
		}) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the holder's offer never named input %s: %+v (%v)", root, ns, err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	j2 := submit(t, sub, reads("near", 1))
	j2 = waitJob(t, sub, j2.ID, 60*time.Second, "release", released)
	if j2.Provider != holder {
		t.Fatalf("job reading held data went to %s, want the holder %s (best fit alone picks %s)", j2.Provider, holder, other)
	}

	// The holder busy, a job that may wait for it does, though the other
	// provider is free.
	busy := submit(t, sub, decl("busy", "sleep 600", 2, 20*time.Minute))
	waitJob(t, sub, busy.ID, 60*time.Second, "running on the holder", func(j api.Job) bool {
		return j.State == api.JobRunning && j.Provider == holder
	})
	patient := reads("patient", 1)
	patient.Request.LocalityWait = 2 * market.Minute
	j5 := submit(t, sub, patient)
	waitJob(t, sub, j5.ID, 30*time.Second, "a reason naming its data", func(j api.Job) bool {
		return j.State == api.JobQueued && strings.Contains(j.Reason, "waiting for a provider that holds its data")
	})
	if _, err := sub.Withdraw(context.Background(), j5.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Withdraw(context.Background(), busy.ID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, sub, busy.ID, 60*time.Second, "release", released)

	// Both providers free again, a job that turns locality off goes by
	// best fit.
	far := reads("far", 1)
	far.Request.Locality = market.LocalityOff
	j3 := submit(t, sub, far)
	j3 = waitJob(t, sub, j3.ID, 60*time.Second, "release", released)
	if j3.Provider != other {
		t.Fatalf("job with locality off went to %s, want %s by best fit", j3.Provider, other)
	}
}
