package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// gangTrain is a training step across the parts of a gang, written as
// torch.distributed's documentation writes one: init_process_group from
// the environment, an all-reduce, and one step of DistributedDataParallel
// on each rank's own data. Each rank writes what it saw, and what the
// sandbox lets it reach besides the other parts.
const gangTrain = `import json, os, socket
import torch
import torch.distributed as dist

def reach(host, port):
    s = socket.socket()
    s.settimeout(1.5)
    try:
        s.connect((host, port))
        return "connected"
    except OSError as e:
        return type(e).__name__ + ": " + str(e)
    finally:
        s.close()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
before = [p.detach().clone().tolist() for p in model.parameters()]
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
torch.manual_seed(100 + rank)
x, y = torch.randn(16, 4), torch.randn(16, 1)
loss = torch.nn.functional.mse_loss(ddp(x), y)
opt.zero_grad()
loss.backward()
opt.step()
after = [p.detach().tolist() for p in model.parameters()]
dist.barrier()

probes = {
    "outside": reach(os.environ["E31_PROBE_HOST"], int(os.environ["E31_PROBE_PORT"])),
    "stranger": reach("10.31.0.9", 22),
    "own-loopback": reach("127.0.0.1", int(os.environ["E31_PROBE_PORT"])),
}
with open("/out/result.json", "w") as f:
    json.dump({"rank": rank, "world": world, "allreduce": t.item(), "before": before, "after": after,
               "addrs": os.environ["E31_NODE_ADDRS"].split("\n"), "master": os.environ["MASTER_ADDR"],
               "ifname": os.environ["GLOO_SOCKET_IFNAME"], "probes": probes}, f)
dist.destroy_process_group()
`

type gangResult struct {
	Rank      int               `json:"rank"`
	World     int               `json:"world"`
	AllReduce float64           `json:"allreduce"`
	Before    json.RawMessage   `json:"before"`
	After     json.RawMessage   `json:"after"`
	Addrs     []string          `json:"addrs"`
	Master    string            `json:"master"`
	IfName    string            `json:"ifname"`
	Probes    map[string]string `json:"probes"`
}

func requireTorch(t *testing.T) {
	t.Helper()
	if out, err := python("import torch.distributed"); err != nil {
		msg := "no PyTorch for /usr/bin/python3 (apt-get install -y python3-torch): " + strings.TrimSpace(out)
		if os.Getenv("E31_REQUIRE_RUNC") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

func gangNet(t *testing.T, providers int) *cluster.Cluster {
	gpus := []string{""}
	for range providers {
		gpus = append(gpus, "1xH100:80GiB")
	}
	return start(t, cluster.Options{
		N:             providers + 1,
		SimGPUsByNode: gpus,
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "2s"},
	})
}

// TestGangTraining runs a 2-node gang of torch.distributed with the gloo
// backend on two providers: the all-reduce sums both ranks, one DDP step
// leaves the same weights on both (and not the first ones), each part
// reached the other over the gang's interface at the address it was told,
// and nothing else: not the host, not a stranger on the gang's subnet, not
// the host's loopback. e31 get writes each part's output at DIR/<rank>/out;
// status lists the parts.
func TestGangTraining(t *testing.T) {
	requireTorch(t)
	c := gangNet(t, 2)
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(script, []byte(gangTrain), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port the host listens on: the submitter's API.
	host, port, _ := strings.Cut(c.Nodes[0].API, ":")
	d := market.NewDeclaration("ddp", []string{"python3", "/code/train.py"}, 1, market.Duration((3 * time.Minute).Milliseconds()),
		[]market.Input{{Source: script, Mount: "/code/train.py"}})
	d.Work.Env = map[string]string{"E31_PROBE_HOST": hostIP(t, host), "E31_PROBE_PORT": port}
	d.Request.Nodes = 2
	d.Request.Memory = 2 * market.GiB
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 3*time.Minute, "the gang to end", released)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		logs, _ := runE31(t, ctx, c.Nodes[0].API, "logs", j.ID, "--rank", "0", "--stderr")
		t.Fatalf("gang ended %s (%s): %+v\nrank 0's stderr:\n%s", j.Outcome, j.Reason, j.Parts, logs)
	}
	if len(j.Parts) != 2 || j.Parts[0].Provider == j.Parts[1].Provider || j.Parts[0].Provider == "" {
		t.Fatalf("parts %+v, want 2 on two providers", j.Parts)
	}
	out, code := runE31(t, ctx, c.Nodes[0].API, "status", j.ID)
	if code != 0 || !strings.Contains(out, "part 0") || !strings.Contains(out, "part 1") {
		t.Fatalf("e31 status of the gang:\n%s", out)
	}

	dir := filepath.Join(t.TempDir(), "got")
	if out, code := runE31(t, ctx, c.Nodes[0].API, "get", j.ID, "-o", dir); code != 0 {
		t.Fatalf("e31 get of the gang: %s", out)
	}
	var res [2]gangResult
	for r := range res {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(r), "out", "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &res[r]); err != nil {
			t.Fatalf("rank %d's result %q: %v", r, b, err)
		}
	}
	for r, x := range res {
		if x.Rank != r || x.World != 2 || x.AllReduce != 3 {
			t.Fatalf("rank %d saw rank %d of %d and an all-reduce of %v, want itself of 2 and 1+2=3", r, x.Rank, x.World, x.AllReduce)
		}
		if len(x.Addrs) != 2 || x.Master != x.Addrs[0] || x.IfName == "" {
			t.Fatalf("rank %d's gang: addrs %v, master %s, interface %q", r, x.Addrs, x.Master, x.IfName)
		}
		for what, got := range x.Probes {
			if got == "connected" {
				t.Errorf("rank %d reached %s, outside its gang", r, what)
			}
		}
	}
	if string(res[0].After) != string(res[1].After) {
		t.Fatalf("the ranks' weights differ after a DDP step:\n%s\n%s", res[0].After, res[1].After)
	}
	if string(res[0].After) == string(res[0].Before) {
		t.Fatal("the DDP step left the weights as they were")
	}
	t.Logf("probes from rank 0: %v", res[0].Probes)
}

// hostIP is an address of this host that is not loopback, where one
// exists, so that the probe tries the way out a sandbox would take;
// else the address the API listens on.
func hostIP(t *testing.T, fallback string) string {
	t.Helper()
	out, err := python(`import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("192.0.2.1", 9))
    print(s.getsockname()[0])
except OSError:
    print("")
`)
	if ip := strings.TrimSpace(out); err == nil && ip != "" && !strings.HasPrefix(ip, "127.") {
		return ip
	}
	return fallback
}

// A gang that no set of providers can hold says why, and is not split.
func TestGangCannotBePlaced(t *testing.T) {
	c := gangNet(t, 2)
	sub := c.Client(0)
	d := decl("too-big", "true", 1, time.Minute)
	d.Request.Nodes = 3
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 30*time.Second, "Match's reason", func(j api.Job) bool { return strings.Contains(j.Reason, "needs") })
	if !strings.Contains(j.Reason, "needs 3 providers") || j.State != api.JobQueued {
		t.Fatalf("gang of 3 on 2 providers: %s, reason %q", j.State, j.Reason)
	}
	for _, p := range j.Parts {
		if p.Provider != "" {
			t.Fatalf("a part of an unplaceable gang is on %s", p.Provider)
		}
	}
}

// gangCount is a checkpointing loop across a gang: each step all-reduces
// the ranks' step counts over gloo, so that both parts must be up, and
// saves the step at the rank's own checkpoint path.
const gangCount = `import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
p = "/ckpt/step"
step = int(open(p).read()) if os.path.exists(p) else 0
# Each part resumes from its own last checkpoint, pulled at its own time:
# the parts agree to start from the earliest, as a training script's
# ranks agree on the step they resume from.
t = torch.tensor([float(step)])
dist.all_reduce(t, op=dist.ReduceOp.MIN)
step = int(t.item())
print("start at", step, flush=True)
while step < 24:
    t = torch.tensor([float(step)])
    dist.all_reduce(t)
    step += 1
    with open(p + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(p + ".tmp", p)
    time.sleep(0.4)
with open("/out/final", "w") as f:
    f.write(str(step))
dist.destroy_process_group()
`

// A part's provider killed mid-run ends the whole gang (the other part is
// stopped, its checkpoint pulled), and the gang, declared resume: auto,
// goes on whole on the providers left, each part from its own checkpoint,
// under the ID it was submitted with.
func TestGangPartLostResumesWhole(t *testing.T) {
	requireTorch(t)
	c := gangNet(t, 3)
	sub := c.Client(0)
	script := filepath.Join(t.TempDir(), "count.py")
	if err := os.WriteFile(script, []byte(gangCount), 0o644); err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("gang-count", []string{"python3", "/code/count.py"}, 1, market.Duration((4 * time.Minute).Milliseconds()), nil)
	d.Request.Nodes = 2
	d.Request.Memory = 2 * market.GiB
	d.Data = []market.Input{{Source: script, Mount: "/code/count.py"}}
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(1000), Resume: market.ResumeAuto, MaxResumes: 2}
	j := submit(t, sub, d)
	id := j.ID
	var victim int
	poll.Until(t, "both parts running with a checkpoint", 3*time.Minute, func() bool {
		j, err := sub.Job(context.Background(), id)
		if err != nil || len(j.Parts) != 2 {
			return false
		}
		for _, p := range j.Parts {
			pj, err := sub.Job(context.Background(), p.ID)
			if err != nil || pj.State != api.JobRunning || pj.Checkpoint == "" {
				return false
			}
		}
		victim = nodeIndex(t, c, j.Parts[1].Provider)
		return true
	})
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Restart(context.Background(), victim) })

	j = waitJob(t, sub, id, 4*time.Minute, "the gang to go on whole and end", func(j api.Job) bool {
		return released(j) && len(j.Attempts) >= 2
	})
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("gang ended %s (%s) after %d attempts", j.Outcome, j.Reason, len(j.Attempts))
	}
	first := j.Attempts[0]
	if first.Outcome != string(ledger.OutcomeProviderLost) {
		t.Fatalf("the first attempt of the gang ended %s (%s), want provider-lost", first.Outcome, first.Reason)
	}
	for _, p := range j.Parts {
		if p.Provider == c.Nodes[victim].PeerID {
			t.Fatalf("the resumed gang runs a part on the killed provider")
		}
	}
	dir := filepath.Join(t.TempDir(), "got")
	if out, code := runE31(t, context.Background(), c.Nodes[0].API, "get", id, "-o", dir); code != 0 {
		t.Fatalf("e31 get: %s", out)
	}
	for r := range 2 {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint(r), "out", "final"))
		if strings.TrimSpace(string(b)) != "24" {
			t.Fatalf("part %d ended at step %q, want 24", r, b)
		}
		logs, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint(r), "stdout.log"))
		if strings.Contains(string(logs), "start at 0\n") {
			t.Fatalf("part %d of the resumed gang started from the beginning:\n%s", r, logs)
		}
	}
}
