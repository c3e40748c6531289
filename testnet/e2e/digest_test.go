package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// Every node of a small network, the two that offer nothing included,
// reads its one market's digest, published by its one provider, with
// `e31 market --json`: one shard, the whole network, of one provider with
// its two GPUs free on one box.
func TestMarketDigest(t *testing.T) {
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "2xH100:80GiB", ""},
		Heartbeat:     200 * time.Millisecond,
		DigestEvery:   3 * time.Second,
	})
	ctx := context.Background()
	provider := c.Nodes[1].PeerID
	for _, n := range c.Nodes {
		var last string
		// Each ask runs the e31 command: twice a second is enough.
		heard := poll.Eventually(60*time.Second, 500*time.Millisecond, func() bool {
			out, code := runE31(t, ctx, n.API, "market", "--json")
			last = out
			if code != 0 {
				return false
			}
			var m api.Market
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("e31 market --json on %s: %v\n%s", n.Name, err, out)
			}
			if len(m.Shards) != 1 {
				return false
			}
			s := m.Shards[0]
			if s.Class != "" || s.Index != 0 || s.Count != 1 || !s.Own {
				t.Fatalf("%s: digest of shard %s:%d/%d (own %v), want the whole network's", n.Name, s.Class, s.Index, s.Count, s.Own)
			}
			if s.Publisher != provider {
				t.Fatalf("%s: digest published by %s, not by the one provider %s", n.Name, s.Publisher, provider)
			}
			if len(s.Members) == 0 || s.Members[0].ID != provider || len(s.Members[0].Addrs) == 0 {
				t.Fatalf("%s: digest members %+v, want the provider with its addresses", n.Name, s.Members)
			}
			// The first digest may predate the provider's own offer in its
			// view; the next, at once on the change, counts it.
			return s.Providers == 1 && len(s.FreeBoxes) == 3 && s.FreeBoxes[2] == 1 && s.Queued == 0
		})
		if !heard {
			t.Fatalf("%s did not hear the market's digest within 60s; its last answer:\n%s", n.Name, last)
		}
	}
	out, code := runE31(t, ctx, c.Nodes[0].API, "market")
	if code != 0 {
		t.Fatalf("e31 market: exit %d\n%s", code, out)
	}
	t.Logf("e31 market:\n%s", out)
}
