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
)

// countJob counts to 20, half a second a step, keeping the count in its
// checkpoint and, written the ordinary way, starting from the checkpoint
// when there is one: it knows nothing of E31.
const countJob = `n=0
[ -f /ckpt/count ] && n=$(cat /ckpt/count)
echo "start at $n"
while [ "$n" -lt 20 ]; do n=$((n+1)); echo "$n" > /ckpt/count.tmp; mv /ckpt/count.tmp /ckpt/count; sleep 0.5; done
echo "$n" > /out/final`

func faultNet(t *testing.T) *cluster.Cluster {
	return start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"},
	})
}

func nodeIndex(t *testing.T, c *cluster.Cluster, peerID string) int {
	t.Helper()
	for i, n := range c.Nodes {
		if n.PeerID == peerID {
			return i
		}
	}
	t.Fatalf("no node %s", peerID)
	return -1
}

// A provider killed with kill -9 mid-run: the submitter ends the lease as
// provider-lost with the receipts both signed, keeps the last checkpoint,
// and resume finishes the count on the other provider.
func TestProviderKilledResumeFromCheckpoint(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	d := decl("count", countJob, 1, 5*time.Minute)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(1000)}
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 60*time.Second, "two checkpoints", func(j api.Job) bool {
		return j.State == api.JobRunning && j.Checkpoint != "" && j.Provider != ""
	})
	// Let a couple more checkpoints and an interim receipt land.
	before := j.Checkpoint
	j = waitJob(t, sub, j.ID, 30*time.Second, "a newer checkpoint", func(j api.Job) bool { return j.Checkpoint != before })
	victim := nodeIndex(t, c, j.Provider)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Whatever happens, the killed provider comes back at the end so that
	// its restart sweeps the orphaned container.
	t.Cleanup(func() { _ = c.Restart(context.Background(), victim) })

	j = waitJob(t, sub, j.ID, 30*time.Second, "provider-lost", func(j api.Job) bool { return j.State == api.JobReleased })
	detect := time.Since(killed)
	t.Logf("provider loss detected after %s", detect.Round(time.Millisecond))
	if j.Outcome != "provider-lost" || j.Attribution != "provider" {
		t.Fatalf("ended %s/%s, want provider-lost/provider", j.Outcome, j.Attribution)
	}
	// The record of held time is the interim receipts both signed, ended
	// by this side's own final record, marked one-sided.
	rs := receipts(t, sub, j.ID)
	twoSided, oneSided := 0, 0
	for _, r := range rs {
		switch {
		case r.Signer == "" && len(r.ProviderSig) > 0 && len(r.SubmitterSig) > 0:
			twoSided++
		case r.Signer == ledger.SignerSubmitter && r.Final && r.Outcome == ledger.OutcomeProviderLost:
			oneSided++
		default:
			t.Fatalf("receipt %d signed by %q is neither signed by both nor the submitter's own final record", r.Seq, r.Signer)
		}
	}
	if twoSided == 0 || oneSided != 1 {
		t.Fatalf("%d receipts signed by both and %d one-sided final records of the lost lease", twoSided, oneSided)
	}
	// The last checkpoint pulled is there.
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: ck, Checkpoint: true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ck, "count"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || last < 1 || last >= 20 {
		t.Fatalf("checkpoint count %q", b)
	}
	t.Logf("last checkpoint: count %d (work lost since: at most one checkpoint interval)", last)

	// Resume finishes the count on the other provider.
	r, err := sub.Submit(context.Background(), api.SubmitRequest{ResumeOf: j.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = waitJob(t, sub, r.ID, 90*time.Second, "the resumed job to end", released)
	if r.Outcome != "completed" || r.Provider == j.Provider {
		t.Fatalf("resumed job ended %s on %s (lost provider %s)", r.Outcome, r.Provider, j.Provider)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(context.Background(), r.ID, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "out", "final")); strings.TrimSpace(string(b)) != "20" {
		t.Fatalf("final count %q", b)
	}
	logs, _ := os.ReadFile(filepath.Join(out, "stdout.log"))
	if !strings.Contains(string(logs), "start at "+strconv.Itoa(last)) {
		t.Fatalf("resumed run did not start from the checkpoint %d: %q", last, logs)
	}
}

// A submitter killed with kill -9 and restarted still lists all its jobs,
// its ledger verifies, and a job that was running meanwhile completes.
func TestSubmitterKilledAndRestarted(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	done := submit(t, sub, decl("quick", "echo hi > /out/x", 1, time.Minute))
	waitJob(t, sub, done.ID, 60*time.Second, "release", released)
	running := submit(t, sub, decl("slow", "sleep 3; echo ok > /out/x", 1, time.Minute))
	waitJob(t, sub, running.ID, 60*time.Second, "run", func(j api.Job) bool { return j.State == api.JobRunning })
	queued := submit(t, sub, func() market.Declaration {
		d := decl("never", "true", 1, time.Minute)
		d.Request.GPUModel = "H200"
		return d
	}())
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	sub = c.Client(0)
	jobs, err := sub.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, j := range jobs {
		have[j.ID] = true
	}
	for _, id := range []string{done.ID, running.ID, queued.ID} {
		if !have[id] {
			t.Fatalf("job %s forgotten across the restart", id)
		}
	}
	// The running job completes: the provider hands over its output to the
	// submitter when it is back, and both sign the final receipt.
	r := waitJob(t, sub, running.ID, 60*time.Second, "release", released)
	if r.Outcome != "completed" {
		t.Fatalf("job running during the restart ended %s (%s)", r.Outcome, r.Reason)
	}
	finalOf(t, receipts(t, sub, running.ID))
	finalOf(t, receipts(t, sub, done.ID))
	if q, _ := sub.Job(context.Background(), queued.ID); q.State != api.JobQueued {
		t.Fatalf("queued job is %s after the restart", q.State)
	}
}

// A submitter that goes away while its job runs: the provider releases the
// GPUs after its output timeout, keeps the output pinned, and when the
// submitter returns it fetches the output and both sign the final receipt,
// which says how long the output waited.
func TestSubmitterAwayOutputWaits(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--output-timeout", "1s"},
	})
	sub := c.Client(0)
	j := submit(t, sub, decl("away", "sleep 2; echo result > /out/r", 1, time.Minute))
	waitJob(t, sub, j.ID, 60*time.Second, "run", func(j api.Job) bool { return j.State == api.JobRunning })
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	// The provider gives the GPU back without the submitter.
	prov := c.Client(1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		id, err := prov.ID(context.Background())
		if err == nil && len(id.GPUs) == 1 && id.GPUs[0].Free && time.Since(gone) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider still holds its GPU with the submitter away: %+v %v", id.GPUs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // the output waits a while: what the receipt must report
	if err := c.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	sub = c.Client(0)
	j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
	if j.Outcome != "completed" {
		t.Fatalf("ended %s (%s)", j.Outcome, j.Reason)
	}
	f := waitFinal(t, sub, j.ID)
	waitFinal(t, prov, j.ID)
	if f.OutputWait < 1 {
		t.Fatalf("the receipt says the output waited %.2fs; it waited for the submitter's restart", f.OutputWait)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "out", "r")); string(b) != "result\n" {
		t.Fatalf("output %q", b)
	}
}

// A resumed job that loses its provider too resumes again, from its own
// newer checkpoint.
func TestResumeOfAResumption(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	d := decl("count", countJob, 1, 5*time.Minute)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(500), Resume: market.ResumeAuto, MaxResumes: 3}
	j := submit(t, sub, d)
	for round := 0; round < 2; round++ {
		j = waitJob(t, sub, j.ID, 60*time.Second, "a checkpoint", func(j api.Job) bool {
			return j.State == api.JobRunning && len(j.Attempts) == round+1 && j.Attempts[round].Checkpoint != ""
		})
		victim := nodeIndex(t, c, j.Provider)
		if err := c.Kill(victim); err != nil {
			t.Fatal(err)
		}
		// The automatic resumption of this job: its next attempt, under
		// the same ID.
		j = waitJob(t, sub, j.ID, 30*time.Second, "the next attempt", func(j api.Job) bool { return len(j.Attempts) == round+2 })
		if lost := j.Attempts[round]; lost.Outcome != "provider-lost" || j.Attempts[round+1].StartedFrom != lost.Checkpoint {
			t.Fatalf("round %d: attempt %+v, the next starts from %q", round, lost, j.Attempts[round+1].StartedFrom)
		}
		if err := c.Restart(context.Background(), victim); err != nil {
			t.Fatal(err)
		}
	}
	j = waitJob(t, sub, j.ID, 90*time.Second, "the second resumption to end", released)
	if j.Outcome != "completed" || len(j.Attempts) != 3 {
		t.Fatalf("second resumption ended %s (%s)", j.Outcome, j.Reason)
	}
}
