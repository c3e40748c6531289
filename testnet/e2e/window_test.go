package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// slowCountJob counts to 200, a step a second, checkpointing each step:
// longer than the window the test gives it, shorter than its limit.
const slowCountJob = `n=0
[ -f /ckpt/count ] && n=$(cat /ckpt/count)
echo "start at $n"
while [ "$n" -lt 200 ]; do n=$((n+1)); echo "$n" > /ckpt/count.tmp; mv /ckpt/count.tmp /ckpt/count; sleep 1; done
echo "$n" > /out/final`

// TestWindowClosesWhileAJobRuns: a provider whose contribution window
// closes in two or three minutes is given a checkpointing job whose limit
// (15m) the window cannot hold, since no other provider takes it (the
// other is drained). When the window closes the run is preempted with its
// grace, its lease ends preempted and owed up to its last checkpoint on
// both sides, and the job goes on from that checkpoint on the other
// provider, undrained meanwhile, and completes.
func TestWindowClosesWhileAJobRuns(t *testing.T) {
	// Open since the start of this minute, closing two to three minutes
	// from now: hours are whole minutes on the machine's clock.
	now := time.Now()
	opens, closes := now.Truncate(time.Minute), now.Truncate(time.Minute).Add(3*time.Minute)
	hours := "daily " + opens.Format("15:04") + "-" + closes.Format("15:04")
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"},
		ArgsByNode:    [][]string{nil, {"--hours", hours}, nil},
	})
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	windowed, plain := c.Nodes[1], c.Nodes[2]

	if out, code := runE31(t, ctx, plain.API, "drain", "--quick"); code != 0 {
		t.Fatalf("e31 drain --quick exited %d:\n%s", code, out)
	}
	poll.Until(t, "the offers to show the window and the drain", 30*time.Second, func() bool {
		out, _ := runE31(t, ctx, c.Nodes[0].API, "nodes")
		return strings.Contains(out, "(draining)")
	})

	d := decl("night", slowCountJob, 1, 15*time.Minute)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(1000)}
	id := submit(t, sub, d).ID
	j := waitJob(t, sub, id, 90*time.Second, "the job to run with a checkpoint", func(j api.Job) bool {
		return j.State == api.JobRunning && j.Checkpoint != ""
	})
	if j.Provider != windowed.PeerID {
		t.Fatalf("the job runs on %s, want the provider with the short window %s", j.Provider, windowed.PeerID)
	}
	if time.Now().After(closes) {
		t.Fatalf("the job started after the window closed (%s)", closes.Format(time.RFC3339))
	}
	if out, code := runE31(t, ctx, plain.API, "undrain"); code != 0 {
		t.Fatalf("e31 undrain exited %d:\n%s", code, out)
	}

	j = waitJob(t, sub, id, 7*time.Minute, "the job to finish elsewhere", func(j api.Job) bool {
		return released(j) && len(j.Attempts) >= 2
	})
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Provider != plain.PeerID {
		t.Fatalf("job ended %s on %s (reason %q), want completed on the other provider; attempts %+v", j.Outcome, j.Provider, j.Reason, j.Attempts)
	}
	first := j.Attempts[0]
	if first.Outcome != string(ledger.OutcomePreempted) || first.Provider != windowed.PeerID {
		t.Fatalf("first attempt %+v, want preempted on the provider whose window closed", first)
	}
	if j.Attempts[1].StartedFrom == "" {
		t.Fatal("the job started again from the beginning, not from its checkpoint")
	}

	// Both ledgers hold the preempted lease's final receipt, signed by
	// both, naming its last checkpoint and when it was taken: what the
	// lease is owed up to.
	for _, cl := range []*api.Client{sub, c.Client(1)} {
		f := waitLeaseFinal(t, cl, id, first.Lease)
		if f.Outcome != ledger.OutcomePreempted || f.Signer != "" || f.Checkpoint == "" || f.CheckpointAt.IsZero() {
			t.Fatalf("final receipt of the preempted lease: %s signed by %q, checkpoint %q at %s; want preempted, both, a checkpoint and its time",
				f.Outcome, f.Signer, f.Checkpoint, f.CheckpointAt)
		}
		if f.CheckpointAt.After(closes.Add(time.Minute)) {
			t.Fatalf("the preempted lease's last checkpoint is at %s, after the window closed at %s", f.CheckpointAt, closes)
		}
	}

	// The second attempt went on from the step the close left, and
	// finished the count.
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := sub.Get(ctx, id, api.GetRequest{Dir: ck, Checkpoint: true, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	saved := countingDrainJob(t).step(t, ck)
	res := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(ctx, id, api.GetRequest{Dir: res, Attempt: len(j.Attempts)}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(res, "out", "final")); strings.TrimSpace(string(b)) != "200" {
		t.Fatalf("final step %q, want 200", b)
	}
	logs, _ := os.ReadFile(filepath.Join(res, "stdout.log"))
	if saved < 1 || !strings.Contains(string(logs), "start at "+strconv.Itoa(saved)) {
		t.Fatalf("the job went on from step %d? its second attempt's log:\n%s", saved, logs)
	}
	t.Logf("the window closed at step %d; the job went on from it on the other provider", saved)
}
