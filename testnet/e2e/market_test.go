package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// Ten jobs of 1, 2 and 4 GPUs that exactly fill five providers of four GPUs
// are all leased at once, with no GPU in two leases, even though the 1-GPU
// jobs arrive first and could fragment every provider.
func TestTenJobsFillTwentyGPUs(t *testing.T) {
	c := start(t, cluster.Options{
		N:         5,
		GPUs:      4,
		Heartbeat: time.Second,
		// Exact packing needs every provider to match on the same view: a
		// delay well past gossip's delay on a loaded machine, so that views
		// agree and no provider places a job its peers placed elsewhere;
		// and epochs only, since passes between epochs take each view as
		// it stands, which a loaded machine's gossip leaves unequal.
		Args: []string{"--epoch", "2s", "--epoch-delay", "800ms", "--no-fast-path"},
	})
	sub := c.Client(0)
	var ids []string
	for i, g := range []int{1, 1, 1, 1, 2, 2, 2, 2, 4, 4} {
		// Long enough that all ten hold their GPUs at the same time.
		j := submit(t, sub, decl(fmt.Sprintf("fill-%d", i), "sleep 600", g, 20*time.Minute))
		ids = append(ids, j.ID)
	}
	var jobs []api.Job
	for _, id := range ids {
		jobs = append(jobs, waitJob(t, sub, id, 90*time.Second, "running", func(j api.Job) bool { return j.State == api.JobRunning }))
	}
	owner := map[string]string{}
	for _, j := range jobs {
		for _, g := range j.GPUs {
			if other, ok := owner[g]; ok {
				t.Fatalf("GPU %s is leased to both %s and %s", g, other, j.ID)
			}
			owner[g] = j.ID
		}
	}
	if len(owner) != 20 {
		t.Fatalf("%d GPUs leased, want all 20", len(owner))
	}
	// Every GPU is its provider's own.
	nodes, err := sub.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byProvider := map[string]map[string]bool{}
	for _, n := range nodes {
		byProvider[n.PeerID] = map[string]bool{}
		for _, g := range n.GPUs {
			byProvider[n.PeerID][g.UUID] = true
		}
	}
	for _, j := range jobs {
		for _, g := range j.GPUs {
			if !byProvider[j.Provider][g] {
				t.Fatalf("job %s holds %s, not a GPU of its provider %s", j.ID, g, j.Provider)
			}
		}
	}
	for _, id := range ids {
		if _, err := sub.Withdraw(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitJob(t, sub, id, 60*time.Second, "release", released)
	}
	waitAllFree(t, c, 30*time.Second)
}

// A withdrawal racing a lease: exactly one wins, and both sides agree.
func TestWithdrawalRacesLease(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "200ms", "--grace", "1s"},
	})
	sub := c.Client(0)
	prov := c.Client(1)
	for round := 0; round < 8; round++ {
		j := submit(t, sub, decl(fmt.Sprintf("race-%d", round), "sleep 600", 1, time.Hour))
		// Withdraw after a delay that sweeps across the matching epoch.
		time.Sleep(time.Duration(round*20) * time.Millisecond)
		if _, err := sub.Withdraw(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
		j = waitJob(t, sub, j.ID, 60*time.Second, "an end", func(j api.Job) bool { return j.State == api.JobWithdrawn || j.State == api.JobReleased })
		finals := func(cl *api.Client) int {
			n := 0
			for _, r := range receipts(t, cl, j.ID) {
				if r.Final {
					n++
				}
			}
			return n
		}
		subFinals, provFinals := finals(sub), finals(prov)
		if j.State == api.JobReleased {
			// The provider stores the final receipt after the submitter.
			waitFinal(t, prov, j.ID)
			provFinals = finals(prov)
		}
		switch j.State {
		case api.JobWithdrawn: // the withdrawal won: no lease, nothing owed
			if j.Lease != "" || subFinals != 0 || provFinals != 0 {
				t.Fatalf("round %d: withdrawn job has lease %q and %d/%d receipts", round, j.Lease, subFinals, provFinals)
			}
		case api.JobReleased: // the lease won: released as withdrawn, receipts on both sides
			if j.Outcome != "withdrawn" || subFinals != 1 || provFinals != 1 {
				t.Fatalf("round %d: released job outcome %s with %d/%d final receipts", round, j.Outcome, subFinals, provFinals)
			}
		}
		waitAllFree(t, c, 30*time.Second)
	}
}
