package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// A network split into two shards: every node bootstraps from node 0, in
// shard 0, yet the nodes of shard 1 find each other through it; each node
// sees the providers of its own shard only, and a job runs on a provider
// of its submitter's shard.
func TestShardedMarket(t *testing.T) {
	in := func(i int) []string { return []string{"--shard", fmt.Sprint(i)} }
	c := start(t, cluster.Options{
		N:             6,
		Shards:        2,
		ArgsByNode:    [][]string{in(0), in(0), in(0), in(1), in(1), in(1)},
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB", "", "1xH100:80GiB", "1xH100:80GiB"},
	})
	ctx := context.Background()
	shards := [2][]int{{0, 1, 2}, {3, 4, 5}}
	providers := [2][]string{peerIDs(c, []int{1, 2}), peerIDs(c, []int{4, 5})}
	for s, nodes := range shards {
		for _, i := range nodes {
			id, err := c.Client(i).ID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d/2", s); id.Shard != want {
				t.Errorf("%s: shard %q, want %q", c.Nodes[i].Name, id.Shard, want)
			}
			// start waited for the views of each shard to converge; none
			// holds a provider of the other shard.
			got, err := c.Client(i).Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range got {
				if !slices.Contains(providers[s], p.PeerID) {
					t.Errorf("%s, in shard %d, sees provider %s of the other shard", c.Nodes[i].Name, s, p.PeerID)
				}
			}
		}
	}
	// Node 3 was given only node 0, of the other shard, to bootstrap from.
	if peers, err := c.Client(3).Peers(ctx); err != nil {
		t.Fatal(err)
	} else if !slices.ContainsFunc(peers, func(p api.Peer) bool { return p.PeerID == c.Nodes[4].PeerID }) {
		t.Errorf("node3 is not connected to node4 of its shard: %v", peers)
	}

	for s, sub := range []int{0, 3} {
		var ids []string
		for k := range 3 {
			ids = append(ids, submit(t, c.Client(sub), decl(fmt.Sprintf("shard-%d-%d", s, k), "echo ok", 1, time.Minute)).ID)
		}
		for _, id := range ids {
			j := waitJob(t, c.Client(sub), id, 90*time.Second, "released", released)
			if !slices.Contains(providers[s], j.Provider) {
				t.Errorf("job %s of shard %d ran on %s, not a provider of its shard %v", id, s, j.Provider, providers[s])
			}
			if j.Outcome != "completed" {
				t.Errorf("job %s: outcome %s (%s)", id, j.Outcome, j.Reason)
			}
		}
	}
}
