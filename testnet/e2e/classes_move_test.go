package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// A job that waits in a class market with no room moves to one whose
// digest shows room, and runs there: a 20 GB one-GPU job fits both the
// H100 market and the consumer card's, both full when it is declared;
// once the market it was not declared in has room, it moves there after
// --move-after, leaving an attempt withdrawn where it waited, and
// completes on that market's provider under one lease.
func TestJobMovesToAMarketWithRoom(t *testing.T) {
	c := start(t, cluster.Options{
		N:             3,
		Market:        "classes",
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xRTX4090:24GiB"},
		DigestEvery:   3 * time.Second,
		ArgsByNode:    [][]string{{"--move-after", "10s"}},
	})
	ctx := context.Background()
	// Each provider's own job fills its one GPU; the markets' digests
	// show no room.
	fill := map[string]string{}       // market -> the job that fills it
	owner := map[string]int{}         // market -> the node of its one provider
	providerOf := map[string]string{} // market -> that provider's peer ID
	for i, model := range map[int]string{1: "H100", 2: "RTX4090"} {
		d := decl("fill-"+model, "sleep 600", 1, 20*time.Minute)
		d.Request.GPUModel = model
		j := submit(t, c.Client(i), d)
		j = waitJob(t, c.Client(i), j.ID, 90*time.Second, "running", func(j api.Job) bool { return j.State == api.JobRunning })
		fill[j.Market], owner[j.Market], providerOf[j.Market] = j.ID, i, c.Nodes[i].PeerID
		t.Cleanup(func() { _, _ = c.Client(i).Withdraw(context.Background(), j.ID) })
	}
	if len(fill) != 2 {
		t.Fatalf("the two filling jobs are in markets %v, want two", fill)
	}
	full := func() bool {
		var m api.Market
		if err := c.Client(0).Do(ctx, http.MethodGet, "/v1/market", nil, nil, &m); err != nil {
			return false
		}
		seen := 0
		for _, s := range m.Shards {
			shard := p2p.Shard{Class: s.Class, Index: s.Index, Count: s.Count}.String()
			free := 0
			for _, n := range s.FreeBoxes[min(1, len(s.FreeBoxes)):] {
				free += n
			}
			if _, ok := fill[shard]; ok && free == 0 {
				seen++
			}
		}
		return seen == 2
	}
	poll.Until(t, "both markets' digests to show no free GPU", 60*time.Second, full)

	d := decl("moving", "echo moved", 1, 5*time.Minute)
	d.Request.GPUMemory = 20 * market.GiB
	j := submit(t, c.Client(0), d)
	if _, ok := fill[j.Market]; !ok {
		t.Fatalf("declared in market %q, want one of %v", j.Market, fill)
	}
	from := j.Market
	var to string
	for m := range fill {
		if m != from {
			to = m
		}
	}
	// Room opens in the other market.
	if _, err := c.Client(owner[to]).Withdraw(ctx, fill[to]); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c.Client(0), j.ID, 3*time.Minute, "released", released)
	if j.Outcome != "completed" || j.Market != to || j.Provider != providerOf[to] {
		t.Fatalf("the job: %s in %s on %s (%s); want completed in %s on %s", j.Outcome, j.Market, j.Provider, j.Reason, to, providerOf[to])
	}
	if len(j.Attempts) != 2 || j.Attempts[0].Market != from || j.Attempts[0].State != api.JobWithdrawn ||
		!strings.Contains(j.Attempts[0].Reason, "moved to market "+to) || j.Attempts[0].Lease != "" {
		t.Fatalf("attempts %+v; want the first withdrawn in %s with no lease, moved to %s", j.Attempts, from, to)
	}
	if j.Held == nil || j.Held.Leases != 1 {
		t.Fatalf("held %+v; want one lease for the job", j.Held)
	}
	// The job that fills the market it left runs on.
	if f, err := c.Client(owner[from]).Job(ctx, fill[from]); err != nil || f.State != api.JobRunning {
		t.Fatalf("the job filling %s: %v, %v; want it running", from, f.State, err)
	}
}

// A node that only submits hears a followed market's offers only while a
// job of its own is being placed there: once its one job there runs, it
// stops hearing them (six heartbeats later), and a job queued there again
// brings them back, with a reason to wait from the node's own pass.
func TestFollowedOffersHeardWhilePlacing(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		Market:        "classes",
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		DigestEvery:   3 * time.Second,
		Metrics:       true,
	})
	ctx := context.Background()
	offersIn := func() float64 {
		return scrape(t, c.Nodes[0].Metrics)[`e31_gossip_bytes_total{direction="in",topic="offers"}`]
	}
	// Still: no offer heard for three heartbeats (the testnet's is a
	// second), by the samples taken as the poll asks.
	type sample struct {
		at time.Time
		v  float64
	}
	var samples []sample
	still := func() bool {
		now := sample{time.Now(), offersIn()}
		samples = append(samples, now)
		for i := len(samples) - 1; i >= 0; i-- {
			if now.at.Sub(samples[i].at) >= 3*time.Second {
				return samples[i].v == now.v
			}
		}
		return false
	}
	long := decl("long", "sleep 600", 1, 20*time.Minute)
	long.Request.GPUModel = "H100"
	var j api.Job
	var err error
	raw, _ := json.Marshal(long)
	poll.Until(t, "node0 to declare an H100 job in the H100 market", 60*time.Second, func() bool {
		j, err = c.Client(0).Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
		return err == nil
	})
	t.Cleanup(func() { _, _ = c.Client(0).Withdraw(context.Background(), j.ID) })
	waitJob(t, c.Client(0), j.ID, 90*time.Second, "running", func(j api.Job) bool { return j.State == api.JobRunning })
	if offersIn() == 0 {
		t.Fatal("node0 heard no offer of the H100 market while its job was placed there")
	}
	poll.Until(t, "node0 to stop hearing the H100 market's offers", 60*time.Second, still)

	next := submit(t, c.Client(0), long)
	t.Cleanup(func() { _, _ = c.Client(0).Withdraw(context.Background(), next.ID) })
	before := offersIn()
	poll.Until(t, "node0 to hear the H100 market's offers again", 30*time.Second, func() bool { return offersIn() > before })
	waitJob(t, c.Client(0), next.ID, 60*time.Second, "a reason to wait", func(j api.Job) bool {
		return j.State == api.JobQueued && j.Reason != ""
	})
}
