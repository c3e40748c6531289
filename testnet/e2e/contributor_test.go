package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// TestContributorsMachine runs the two ways a contributor's machine stays
// its own without a command: a provider with --reclaim-on-use whose owner
// starts using its (simulated) GPU, and one whose --hours exclude now.
//
// The closed one is offered nothing and says why. Two checkpointing jobs
// take the two open providers; when the owner marks the watched one's GPU
// busy, its job's lease ends preempted and the job goes on from its
// checkpoint on the other provider once that is free, while the watched
// node says it is reclaimed. Once the GPU is left alone for --reclaim-idle
// the node takes work again.
func TestContributorsMachine(t *testing.T) {
	closedDay := time.Now().Add(48 * time.Hour).Format("Mon")
	c := start(t, cluster.Options{
		N:             4,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"},
		ArgsByNode: [][]string{nil,
			{"--reclaim-on-use", "--reclaim-idle", "3s"},
			nil,
			{"--hours", closedDay + " 00:00-01:00"}},
	})
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	watched, plain, closed := c.Nodes[1], c.Nodes[2], c.Nodes[3]

	poll.Until(t, "the closed provider's offer to say so", 30*time.Second, func() bool {
		out, _ := runE31(t, ctx, c.Nodes[0].API, "nodes")
		return strings.Contains(out, "(outside its hours)")
	})
	if out, _ := runE31(t, ctx, closed.API, "id"); !strings.Contains(out, "hours     "+closedDay+" 00:00-01:00 (outside its hours)") {
		t.Fatalf("e31 id on the closed node:\n%s", out)
	}

	a := submit(t, sub, countingDrainJob(t).decl)
	b := submit(t, sub, countingDrainJob(t).decl)
	var onWatched api.Job
	poll.Until(t, "both jobs to run with a checkpoint", 90*time.Second, func() bool {
		ja, errA := sub.Job(ctx, a.ID)
		jb, errB := sub.Job(ctx, b.ID)
		if errA != nil || errB != nil || ja.Checkpoint == "" || jb.Checkpoint == "" {
			return false
		}
		for _, j := range []api.Job{ja, jb} {
			if j.Provider == closed.PeerID {
				t.Fatalf("job %s runs on the provider outside its hours", j.ID)
			}
			if j.Provider == watched.PeerID {
				onWatched = j
			}
		}
		return true
	})
	if onWatched.ID == "" {
		t.Fatal("neither job runs on the watched provider")
	}

	// The owner starts a process on GPU 0.
	use := filepath.Join(watched.Data, node.SimGPUUse, "0")
	if err := os.WriteFile(use, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the watched node to say it is reclaimed", 30*time.Second, func() bool {
		out, _ := runE31(t, ctx, watched.API, "id")
		return strings.Contains(out, "reclaim-on-use") && strings.Contains(out, "4242")
	})
	j := waitJob(t, sub, onWatched.ID, 3*time.Minute, "the reclaimed job to finish elsewhere", func(j api.Job) bool {
		return released(j) && len(j.Attempts) >= 2
	})
	if j.Outcome != "completed" || j.Provider != plain.PeerID || j.Attempts[0].Outcome != string(ledger.OutcomePreempted) {
		t.Fatalf("the reclaimed job ended %s on %s after %+v, want completed on the other open provider after a preempted attempt", j.Outcome, j.Provider, j.Attempts[0])
	}
	if j.Attempts[1].StartedFrom == "" {
		t.Fatal("the reclaimed job started again from the beginning, not from its checkpoint")
	}

	// The owner is done: after --reclaim-idle the node takes work again.
	if err := os.Remove(use); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the watched node to take work again", 30*time.Second, func() bool {
		out, _ := runE31(t, ctx, watched.API, "id")
		return !strings.Contains(out, "drained")
	})
	poll.Until(t, "its offer to say so", 30*time.Second, func() bool {
		out, _ := runE31(t, ctx, c.Nodes[0].API, "nodes")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, watched.PeerID) {
				return !strings.Contains(l, "(draining)")
			}
		}
		return false
	})
}
