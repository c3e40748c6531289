package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// Three providers at three prices: every peer sees each price in the
// provider's offer, a job with a cap lands on the cheapest that fits it,
// under a lease both signed at that price, and a job whose cap every
// offer exceeds waits, saying what the cheapest asks.
func TestPricedProviders(t *testing.T) {
	prices := map[int]string{1: "3.00", 2: "1.50", 3: "2.00"}
	args := make([][]string, 4)
	for i, p := range prices {
		args[i] = []string{"--price", "H100=" + p, "--currency", "credits"}
	}
	c := start(t, cluster.Options{N: 4, SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB", "1xH100:80GiB"}, ArgsByNode: args})
	ctx := context.Background()
	sub := c.Client(0)
	poll.Until(t, "node0 to see the three prices", 30*time.Second, func() bool {
		nodes, err := sub.Nodes(ctx)
		if err != nil {
			return false
		}
		seen := 0
		for _, n := range nodes {
			for i, p := range prices {
				if n.PeerID == c.Nodes[i].PeerID && n.Price.String() == p && n.Currency == "credits" {
					seen++
				}
			}
		}
		return seen == 3
	})

	capped := decl("capped", "echo ok", 1, time.Minute)
	capped.Request.MaxPrice = 2_500_000
	j := waitJob(t, sub, submit(t, sub, capped).ID, 90*time.Second, "released", released)
	if j.Outcome != "completed" || j.Provider != c.Nodes[2].PeerID || j.Price.String() != "1.50" {
		t.Fatalf("the capped job: %s on %s at %s (%s); want completed on the cheapest, %s, at 1.50 signed in the lease", j.Outcome, j.Provider, j.Price, j.Reason, c.Nodes[2].PeerID)
	}

	tooLow := decl("too-low", "echo ok", 1, time.Minute)
	tooLow.Request.MaxPrice = market.PriceUnit
	low := submit(t, sub, tooLow)
	t.Cleanup(func() { _, _ = sub.Withdraw(context.Background(), low.ID) })
	waitJob(t, sub, low.ID, 60*time.Second, "a reason naming the cheapest price", func(j api.Job) bool {
		return j.State == api.JobQueued && strings.Contains(j.Reason, "the cheapest asks 1.50 per GPU-hour, the cap is 1.00")
	})
}
