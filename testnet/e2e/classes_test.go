package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// A network split by resource class: each provider takes part in the
// market of its GPUs' class, which e31 id names, and sees only that
// market's providers. A job is declared in a class market that fits it,
// chosen on the digests of every market, and its submitter follows that
// market while the job is open: an H100 job runs on an H100 from an H100
// node, from the node without GPUs and from the consumer node alike, and
// a job for 20 GiB of GPU memory, which both classes hold, runs on either.
// A job no market holds is refused, naming the submitter's class. A stranger
// that offers a consumer card on the H100 market's topic is refused
// there as invalid and never in view, and is in view once it offers
// what the class holds.
func TestClassMarkets(t *testing.T) {
	c := start(t, cluster.Options{
		N:             4,
		Market:        "classes",
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB", "1xRTX4090:24GiB"},
		Metrics:       true,
		// Each class market's digest comes often: a node of another
		// class routes a job by it.
		DigestEvery: 3 * time.Second,
	})
	ctx := context.Background()
	for i, want := range []string{"cpu:0/1", "H100x1-4:0/1", "H100x1-4:0/1", "consumer-24G:0/1"} {
		id, err := c.Client(i).ID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id.Shard != want {
			t.Errorf("%s: shard %q, want %q", c.Nodes[i].Name, id.Shard, want)
		}
	}
	// start waited for each class market's views to converge; the H100
	// nodes see each other and not the consumer card.
	h100s := peerIDs(c, []int{1, 2})
	got, err := c.Client(1).Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if !slices.Contains(h100s, p.PeerID) {
			t.Errorf("node1, of class H100x1-4, sees provider %s of another class", p.PeerID)
		}
	}

	h100 := decl("on-h100", "echo ok", 1, time.Minute)
	h100.Request.GPUModel = "H100"
	small := decl("20gib", "echo ok", 1, time.Minute)
	small.Request.GPUMemory = 20 * market.GiB
	gpus := append(slices.Clone(h100s), c.Nodes[3].PeerID)
	for _, run := range []struct {
		from int
		d    market.Declaration
		on   []string
	}{
		{from: 1, d: h100, on: h100s},
		{from: 2, d: small, on: gpus},
		{from: 3, d: small, on: gpus},
	} {
		id := submit(t, c.Client(run.from), run.d).ID
		j := waitJob(t, c.Client(run.from), id, 90*time.Second, "released", released)
		if j.Outcome != "completed" || !slices.Contains(run.on, j.Provider) {
			t.Errorf("job %s from %s: %s on %s (%s), want completed on one of %v", run.d.Name, c.Nodes[run.from].Name, j.Outcome, j.Provider, j.Reason, run.on)
		}
	}

	// Node 0 has no GPUs and node 3 a consumer card: neither class holds
	// an H100 job, which each declares in the H100 market, as its digest
	// shows, and follows there until it completes on an H100.
	raw, err := json.Marshal(h100)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int{0, 3} {
		var j api.Job
		// Refused until the H100 market's digest has reached the node.
		poll.Until(t, c.Nodes[from].Name+" to declare an H100 job in the H100 market", 60*time.Second, func() bool {
			j, err = c.Client(from).Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
			return err == nil
		})
		j = waitJob(t, c.Client(from), j.ID, 90*time.Second, "released", released)
		if j.Outcome != "completed" || !slices.Contains(h100s, j.Provider) {
			t.Errorf("H100 job from %s: %s on %s (%s), want completed on one of %v", c.Nodes[from].Name, j.Outcome, j.Provider, j.Reason, h100s)
		}
	}

	// A job that waits in a market node 0 only follows says why, as a
	// job waiting in its own market does: no H100 box has a TiB of
	// memory to lend.
	huge := h100
	huge.Name, huge.Request.Memory = "huge", 1024*market.GiB
	if raw, err = json.Marshal(huge); err != nil {
		t.Fatal(err)
	}
	j, err := c.Client(0).Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c.Client(0), j.ID, 60*time.Second, "a reason to wait naming memory", func(j api.Job) bool {
		return strings.Contains(j.Reason, "memory")
	})
	t.Logf("job %s waits in the H100 market: %s", j.ID, j.Reason)
	if _, err := c.Client(0).Withdraw(ctx, j.ID); err != nil {
		t.Fatal(err)
	}

	// No class market holds a B200.
	b200 := decl("b200", "true", 1, time.Minute)
	b200.Request.GPUModel = "B200"
	raw, err = json.Marshal(b200)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client(0).Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
	if err == nil || !strings.Contains(err.Error(), "cpu") || !strings.Contains(err.Error(), "fits no class market") {
		t.Errorf("a B200 job from a node of class cpu: %v, want a refusal naming the class", err)
	}

	// A stranger in the H100 market offers consumer cards there.
	r, err := rogue.New(ctx, rogue.Config{Network: "testnet", Shard: p2p.Shard{Class: "H100x1-4", Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if err := r.Connect(ctx, c.Addrs()...); err != nil {
		t.Fatal(err)
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Joined(jctx); err != nil {
		t.Fatal(err)
	}
	invalid := func() float64 {
		m, err := bench.Scrape(ctx, c.Nodes[1].Metrics)
		if err != nil {
			t.Fatal(err)
		}
		return m[`e31_gossip_rejected_total{reason="invalid"}`]
	}
	before := invalid()
	if err := r.Offer(ctx, r.GPUs("NVIDIA GeForce RTX 4090", 1, 24<<30)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "node1 to refuse, as invalid, a consumer card's offer on the H100 topic", 30*time.Second, func() bool { return invalid() > before })
	inView := func() bool {
		got, err := c.Client(1).Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(got, func(p api.Node) bool { return p.PeerID == r.ID().String() })
	}
	if inView() {
		t.Fatal("node1 holds the refused offer in its view")
	}
	// The same stranger offering an H100 is in the class's market.
	if err := r.Offer(ctx, r.GPUs("H100", 1, 80<<30)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "node1 to hold the stranger's H100 offer", 30*time.Second, inView)
}
