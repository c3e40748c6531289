package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// trainTorch is a PyTorch training loop written the ordinary way: it
// loads its checkpoint if there is one, saves one every step, and knows
// nothing of E31 or of signals.
const trainTorch = `import os, time
import torch

ckpt = "/ckpt/model.pt"
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    step = state["step"]
print("start at", step, flush=True)
x = torch.randn(256, 8)
y = x.sum(dim=1, keepdim=True)
while step < 40:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, ckpt + ".tmp")
    os.replace(ckpt + ".tmp", ckpt)
    print("step", step, "loss", round(loss.item(), 4), flush=True)
    time.sleep(0.3)
with open("/out/final", "w") as f:
    f.write(str(step))
`

// drainJob is a checkpointing job for the drain tests: its declaration,
// the step it ends at, and how it reads the step in its checkpoint.
type drainJob struct {
	decl  market.Declaration
	final int
	step  func(t *testing.T, ckptDir string) int
}

func countingDrainJob(t *testing.T) drainJob {
	d := decl("count", countJob, 1, 5*time.Minute)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(1000)}
	return drainJob{decl: d, final: 20, step: func(t *testing.T, dir string) int {
		b, err := os.ReadFile(filepath.Join(dir, "count"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("checkpoint count %q", b)
		}
		return n
	}}
}

func torchDrainJob(t *testing.T) drainJob {
	if out, err := python("import torch"); err != nil {
		msg := "no PyTorch for /usr/bin/python3 (apt-get install -y python3-torch): " + strings.TrimSpace(out)
		if os.Getenv("E31_REQUIRE_RUNC") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	script := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(script, []byte(trainTorch), 0o644); err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("train", []string{"python3", "/code/train.py"}, 1, market.Duration((5 * time.Minute).Milliseconds()), nil)
	d.Request.Memory = 2 * market.GiB
	d.Data = []market.Input{{Source: script, Mount: "/code/train.py"}}
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(1000)}
	return drainJob{decl: d, final: 40, step: func(t *testing.T, dir string) int {
		// The step inside torch's own file, read by torch as the job does.
		out, err := python("import torch,sys; print(torch.load(sys.argv[1])['step'])", filepath.Join(dir, "model.pt"))
		if err != nil {
			t.Fatalf("read the checkpoint's step: %v\n%s", err, out)
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("checkpoint step %q", out)
		}
		return n
	}}
}

// TestDrainQuickMovesTheJob drains, with e31 drain --quick, the provider
// running a checkpointing job that declared nothing about resuming: the
// run gets SIGTERM and its grace, the lease ends preempted (the
// provider's, signed by both and kept in both ledgers, owed only up to
// its last checkpoint), and the job finishes on the other provider from
// the saved step, under the ID it was submitted with. The drained node
// takes no lease until e31 undrain. Once with the counting job, once with
// a PyTorch loop written the ordinary way.
func TestDrainQuickMovesTheJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  func(*testing.T) drainJob
	}{{"counting job", countingDrainJob}, {"pytorch loop", torchDrainJob}} {
		t.Run(tc.name, func(t *testing.T) {
			job := tc.job(t)
			c := faultNet(t)
			drainMoves(t, c, job)
		})
	}
}

func drainMoves(t *testing.T, c *cluster.Cluster, job drainJob) {
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	j := submit(t, sub, job.decl)
	id := j.ID
	j = waitJob(t, sub, id, 90*time.Second, "a checkpoint", func(j api.Job) bool { return j.State == api.JobRunning && j.Checkpoint != "" })
	before := j.Checkpoint
	j = waitJob(t, sub, id, 60*time.Second, "a newer checkpoint", func(j api.Job) bool { return j.Checkpoint != before })
	victim := nodeIndex(t, c, j.Provider)
	vAPI := c.Nodes[victim].API

	out, code := runE31(t, ctx, vAPI, "drain", "--quick")
	if code != 0 || !strings.Contains(out, "quick") {
		t.Fatalf("e31 drain --quick exited %d:\n%s", code, out)
	}
	j = waitJob(t, sub, id, 3*time.Minute, "the job to finish elsewhere", func(j api.Job) bool {
		return released(j) && len(j.Attempts) >= 2
	})
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Provider == c.Nodes[victim].PeerID {
		t.Fatalf("job ended %s on %s (reason %q), want completed on the other provider; attempts %+v", j.Outcome, j.Provider, j.Reason, j.Attempts)
	}
	first := j.Attempts[0]
	if first.Outcome != string(ledger.OutcomePreempted) || first.Attribution != string(ledger.AttributionProvider) || first.Provider != c.Nodes[victim].PeerID {
		t.Fatalf("first attempt %+v, want preempted, the drained provider's", first)
	}

	// Both ledgers hold the preempted lease's final receipt, signed by
	// both, saying when its last checkpoint was taken.
	for _, cl := range []*api.Client{sub, c.Client(victim)} {
		f := waitLeaseFinal(t, cl, id, first.Lease)
		if f.Outcome != ledger.OutcomePreempted || f.Signer != "" || f.Checkpoint == "" || f.CheckpointAt.IsZero() {
			t.Fatalf("final receipt of the preempted lease: %s signed by %q, checkpoint %q at %s; want preempted, both, a checkpoint and its time",
				f.Outcome, f.Signer, f.Checkpoint, f.CheckpointAt)
		}
	}

	// The second attempt started from the checkpoint the drain left.
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := sub.Get(ctx, id, api.GetRequest{Dir: ck, Checkpoint: true, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	saved := job.step(t, ck)
	res := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(ctx, id, api.GetRequest{Dir: res, Attempt: len(j.Attempts)}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(res, "out", "final")); strings.TrimSpace(string(b)) != strconv.Itoa(job.final) {
		t.Fatalf("final step %q, want %d", b, job.final)
	}
	logs, _ := os.ReadFile(filepath.Join(res, "stdout.log"))
	if saved < 1 || !strings.Contains(string(logs), "start at "+strconv.Itoa(saved)) {
		t.Fatalf("the job went on from step %d? its second attempt's log:\n%s", saved, logs)
	}
	t.Logf("drained at step %d; went on from it on the other provider", saved)

	// Usage: the preempted lease is owed up to its checkpoint only.
	u, code := runE31(t, ctx, c.Nodes[0].API, "usage", "--job", id, "--json")
	if code != 0 {
		t.Fatalf("e31 usage exited %d: %s", code, u)
	}
	var rep ledger.UsageReport
	if err := json.Unmarshal([]byte(u), &rep); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, u)
	}
	preempted := false
	for _, r := range rep.Rows {
		if r.Outcome == ledger.OutcomePreempted {
			preempted = true
			if !r.Owed || r.OwedGPUHours <= 0 || r.OwedGPUHours > r.GPUHours {
				t.Fatalf("preempted row %+v: want owed in part, up to the checkpoint", r)
			}
		}
	}
	if !preempted {
		t.Fatalf("usage has no preempted row: %+v", rep.Rows)
	}

	// The drained node takes nothing new: two jobs at once both run on
	// the other provider, one after the other.
	other := 3 - victim // providers are nodes 1 and 2
	jobs := []api.Job{submit(t, sub, decl("after-a", "sleep 1", 1, time.Minute)), submit(t, sub, decl("after-b", "sleep 1", 1, time.Minute))}
	for _, a := range jobs {
		a = waitJob(t, sub, a.ID, 90*time.Second, "release", released)
		if a.Outcome != "completed" || a.Provider != c.Nodes[other].PeerID {
			t.Fatalf("job %s ended %s on %s while %s was drained, want completed on %s", a.Name, a.Outcome, a.Provider, c.Nodes[victim].PeerID, c.Nodes[other].PeerID)
		}
	}
	if out, _ := runE31(t, ctx, c.Nodes[0].API, "nodes"); !strings.Contains(out, "(draining)") {
		t.Fatalf("e31 nodes does not show the drained node:\n%s", out)
	}

	// Undrained, it takes work again: with the other provider busy, the
	// next job goes to it.
	if out, code := runE31(t, ctx, vAPI, "undrain"); code != 0 {
		t.Fatalf("e31 undrain exited %d: %s", code, out)
	}
	busy := submit(t, sub, decl("busy", "sleep 5", 1, time.Minute))
	waitJob(t, sub, busy.ID, 60*time.Second, "run", func(j api.Job) bool { return j.State == api.JobRunning })
	next := submit(t, sub, decl("next", "true", 1, time.Minute))
	next = waitJob(t, sub, next.ID, 60*time.Second, "release", released)
	busy = waitJob(t, sub, busy.ID, 60*time.Second, "release", released)
	if next.Outcome != "completed" || next.Provider == busy.Provider {
		t.Fatalf("after undrain a job ended %s on %s beside a busy %s, want completed on the undrained node", next.Outcome, next.Provider, busy.Provider)
	}
}

// A graceful drain lets the running job finish where it runs, and gives
// the node nothing new.
func TestDrainGracefulLetsTheJobFinish(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := submit(t, sub, decl("finish", "sleep 3; echo done > /out/x", 1, time.Minute))
	j = waitJob(t, sub, j.ID, 60*time.Second, "run", func(j api.Job) bool { return j.State == api.JobRunning })
	victim := nodeIndex(t, c, j.Provider)
	if out, code := runE31(t, ctx, c.Nodes[victim].API, "drain"); code != 0 || !strings.Contains(out, "graceful") {
		t.Fatalf("e31 drain exited %d:\n%s", code, out)
	}
	out, _ := runE31(t, ctx, c.Nodes[victim].API, "id")
	if !strings.Contains(out, "drained") {
		t.Fatalf("e31 id does not say the node is drained:\n%s", out)
	}
	j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
	if j.Outcome != "completed" || len(j.Attempts) > 1 || j.Provider != c.Nodes[victim].PeerID {
		t.Fatalf("job ended %s on %s with %d attempts, want completed where it ran", j.Outcome, j.Provider, len(j.Attempts))
	}
	next := waitJob(t, sub, submit(t, sub, decl("next", "true", 1, time.Minute)).ID, 60*time.Second, "release", released)
	if next.Provider == c.Nodes[victim].PeerID {
		t.Fatalf("a job was placed on the drained node")
	}
}

// SIGTERM to a provider's e31d (systemctl stop) drains it: the running
// job's lease ends preempted, signed by both, rather than lost, and the
// job goes on elsewhere from its last checkpoint by itself.
func TestStopDrainsTheProvider(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	job := countingDrainJob(t)
	j := submit(t, sub, job.decl)
	id := j.ID
	j = waitJob(t, sub, id, 90*time.Second, "a checkpoint", func(j api.Job) bool { return j.State == api.JobRunning && j.Checkpoint != "" })
	victim := nodeIndex(t, c, j.Provider)
	n := c.Nodes[victim]
	t.Cleanup(func() { _ = c.Restart(context.Background(), victim) })
	stopped := make(chan bool, 1)
	go func() { stopped <- n.StopWithin(2 * time.Minute) }()
	j = waitJob(t, sub, id, 3*time.Minute, "the job to finish elsewhere", func(j api.Job) bool { return released(j) && len(j.Attempts) >= 2 })
	if j.Outcome != "completed" || j.Attempts[0].Outcome != string(ledger.OutcomePreempted) {
		t.Fatalf("job ended %s after attempts %+v, want completed after a preempted one", j.Outcome, j.Attempts)
	}
	if f := waitLeaseFinal(t, sub, id, j.Attempts[0].Lease); f.Outcome != ledger.OutcomePreempted || f.Signer != "" {
		t.Fatalf("the stopped provider's lease: %s signed by %q, want preempted signed by both", f.Outcome, f.Signer)
	}
	select {
	case byItself := <-stopped:
		if !byItself {
			t.Fatal("the draining daemon did not exit by itself within 2 minutes of SIGTERM")
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the draining daemon is still running")
	}
	if !strings.Contains(readLog(t, n), "draining the leases before stopping") {
		t.Fatal("the daemon's log does not say it drained before stopping")
	}
}

func readLog(t *testing.T, n *cluster.Node) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// python runs code with the host's /usr/bin/python3, the interpreter the
// sandbox's base root offers jobs, and returns what it printed.
func python(code string, args ...string) (string, error) {
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", code}, args...)...).CombinedOutput()
	return string(out), err
}

// waitLeaseFinal waits for the final receipt of one lease of a job (the
// receipts of a job are those of all its attempts) in a node's ledger,
// the one both signed where there is one.
func waitLeaseFinal(t *testing.T, cl *api.Client, job, lease string) ledger.Receipt {
	t.Helper()
	var f ledger.Receipt
	poll.Until(t, "the final receipt of lease "+lease, 30*time.Second, func() bool {
		var ofLease []ledger.Receipt
		for _, r := range receipts(t, cl, job) {
			if r.Lease == lease {
				ofLease = append(ofLease, r)
			}
		}
		for _, r := range ofLease {
			if r.Final {
				f = finalOf(t, ofLease)
				return true
			}
		}
		return false
	})
	return f
}
