package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// trainJob is a training loop written the ordinary way, in Python without
// E31 or torch: it loads its state if the file is there, saves it after
// every step (atomically, as torch.save users do with a rename), and keeps
// a "latest" link beside it.
const trainJob = `import json, os, time
p = "/ckpt/state.json"
step = 0
if os.path.exists(p):
    with open(p) as f:
        step = json.load(f)["step"]
print("start at", step, flush=True)
while step < 16:
    step += 1
    with open(p + ".tmp", "w") as f:
        json.dump({"step": step}, f)
    os.replace(p + ".tmp", p)
    if not os.path.islink("/ckpt/latest"):
        os.symlink("state.json", "/ckpt/latest")
    time.sleep(0.5)
with open("/out/final", "w") as f:
    f.write(str(step))
`

// A provider killed with -9 while a Python training job runs, submitted as
// a user does, with e31 submit --wait and followed with e31 logs -f: the
// job, declared resume: auto, continues on the other provider from the
// state it saved at its own checkpoint path, and keeps the ID it was
// submitted with. --wait follows it into its second attempt and exits 0,
// logs -f shows both attempts' lines, status lists both attempts.
func TestAutoResumeContinuesTraining(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 on this host for the sandbox's base root")
	}
	c := faultNet(t)
	sub := c.Client(0)
	api0 := c.Nodes[0].API
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()
	script := filepath.Join(work, "train.py")
	if err := os.WriteFile(script, []byte(trainJob), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out")
	var waitOut, logsOut lockedBuffer
	waitCmd := exec.CommandContext(ctx, bin.E31, "--api", api0, "submit", "--wait", "-o", out,
		"--name", "train", "--gpus", "1", "--limit", "5m", "--memory", "256MiB",
		"--checkpoint-path", "/ckpt", "--checkpoint-every", "1s", "--resume", "auto", "--max-resumes", "2",
		"--input", script+":/code/train.py", "--", "python3", "/code/train.py")
	waitCmd.Stdout, waitCmd.Stderr = &waitOut, &waitOut
	if err := waitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- waitCmd.Wait() }()

	var id string
	poll.Until(t, "the job to be listed", 30*time.Second, func() bool {
		jobs, err := sub.Jobs(ctx)
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.Name == "train" {
				id = j.ID
				return true
			}
		}
		return false
	})
	logsCmd := exec.CommandContext(ctx, bin.E31, "--api", api0, "logs", "-f", id)
	logsCmd.Stdout, logsCmd.Stderr = &logsOut, &logsOut
	if err := logsCmd.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan error, 1)
	go func() { logsDone <- logsCmd.Wait() }()

	j := waitJob(t, sub, id, 60*time.Second, "a checkpoint", func(j api.Job) bool { return j.Checkpoint != "" })
	before := j.Checkpoint
	j = waitJob(t, sub, id, 30*time.Second, "a newer checkpoint", func(j api.Job) bool { return j.Checkpoint != before })
	first := j.Attempts[len(j.Attempts)-1].ID
	victim := nodeIndex(t, c, j.Provider)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Restart(context.Background(), victim) })

	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("e31 submit --wait of a job that resumed itself: %v\n%s", err, waitOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("e31 submit --wait did not end\n%s", waitOut.String())
	}
	if s := waitOut.String(); !strings.Contains(s, "completed") || !strings.Contains(s, "2 attempts") || !strings.Contains(s, "attempt 2") {
		t.Fatalf("e31 submit --wait output does not show the completed second attempt:\n%s", s)
	}
	j, err := sub.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Outcome != string(ledger.OutcomeCompleted) || len(j.Attempts) != 2 || j.Attempts[0].ID != first {
		t.Fatalf("job %s ended %s with attempts %+v, want completed on a second attempt after %s", id, j.Outcome, j.Attempts, first)
	}
	if a := j.Attempts[0]; a.Outcome != string(ledger.OutcomeProviderLost) {
		t.Fatalf("first attempt ended %s, want %s", a.Outcome, ledger.OutcomeProviderLost)
	}
	if j.Held == nil || len(j.Held.Providers) != 2 {
		t.Fatalf("held %+v, want time on 2 providers", j.Held)
	}
	select {
	case err := <-logsDone:
		if err != nil {
			t.Fatalf("e31 logs -f: %v\n%s", err, logsOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("e31 logs -f did not end with the job\n%s", logsOut.String())
	}
	logs := logsOut.String()
	second := strings.Index(logs, "e31: attempt 2 of job "+id)
	if !strings.Contains(logs, "start at 0\n") || second < 0 {
		t.Fatalf("e31 logs -f %s does not show both attempts:\n%s", id, logs)
	}
	var saved int
	at := strings.Index(logs[second:], "start at ")
	if at < 0 {
		t.Fatalf("the second attempt does not say where it started:\n%s", logs)
	}
	if _, err := fmt.Sscanf(logs[second+at:], "start at %d", &saved); err != nil || saved == 0 {
		t.Fatalf("the second attempt did not start from a saved step (%d, %v):\n%s", saved, err, logs)
	}
	// It started from the last checkpoint the first attempt took, which
	// e31 get --attempt 1 writes.
	firstCk := filepath.Join(t.TempDir(), "first-ck")
	if got, err := exec.CommandContext(ctx, bin.E31, "--api", api0, "get", id, "--attempt", "1", "--checkpoint", "-o", firstCk).CombinedOutput(); err != nil {
		t.Fatalf("e31 get --attempt 1 --checkpoint: %v\n%s", err, got)
	}
	if step := stateStep(t, firstCk); step != saved {
		t.Fatalf("the second attempt started at step %d, the first attempt's last checkpoint holds %d", saved, step)
	}

	status, err := exec.CommandContext(ctx, bin.E31, "--api", api0, "status", id).CombinedOutput()
	if err != nil {
		t.Fatalf("e31 status %s: %v\n%s", id, err, status)
	}
	if !strings.Contains(string(status), first) || !strings.Contains(string(status), j.Attempts[1].ID) ||
		!strings.Contains(string(status), string(ledger.OutcomeProviderLost)) || !strings.Contains(string(status), "held ") {
		t.Fatalf("e31 status %s does not list both attempts and the time held:\n%s", id, status)
	}

	if b, _ := os.ReadFile(filepath.Join(out, "out", "final")); strings.TrimSpace(string(b)) != "16" {
		t.Fatalf("final step %q", b)
	}
	// The last attempt's own checkpoint has the link it kept, as a link.
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := sub.Get(ctx, id, api.GetRequest{Dir: ck, Checkpoint: true}); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(ck, "latest")); err != nil || target != "state.json" {
		t.Fatalf("checkpoint link latest -> %q (%v)", target, err)
	}
}

// lockedBuffer is a buffer a command writes to while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stateStep reads the step a checkpoint written into dir saved.
func stateStep(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), `{"step": `), "}")
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("checkpoint state %q", b)
	}
	return n
}

// A provider killed with -9 as soon as its lease is signed, before any
// receipt: the submitter still ends the lease with a record of it, its own,
// marked one-sided; when the provider is back the two settle on a receipt
// both sign, which supersedes it.
func TestProviderKilledBeforeFirstReceiptLeavesARecord(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	j := submit(t, sub, decl("early", "sleep 60", 1, 5*time.Minute))
	// The run step comes from the provider, after it has stored the lease:
	// a kill between the submitter's countersignature and that write (a
	// millisecond on an idle machine) leaves only the submitter's record.
	// It comes with the receipt signed as the run starts, so the kill
	// lands after that one and before any other, the final one included.
	j = waitJob(t, sub, j.ID, 60*time.Second, "the provider's run step", func(j api.Job) bool {
		return j.Lease != "" && !stepAt(j, api.StepRun).IsZero()
	})
	victim := nodeIndex(t, c, j.Provider)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, sub, j.ID, 30*time.Second, "provider-lost", released)
	res, err := sub.Receipts(context.Background(), j.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	rs := receipts(t, sub, j.ID)
	var final *ledger.Receipt
	for i := range rs {
		if rs[i].Final {
			final = &rs[i]
		}
	}
	if final == nil {
		t.Fatalf("no record of the lost lease: %d receipts", len(rs))
	}
	twoSidedBefore := final.Signer == ""
	if !twoSidedBefore && (final.Signer != ledger.SignerSubmitter || final.Outcome != ledger.OutcomeProviderLost || res.Verify.OneSided != 1) {
		t.Fatalf("the record is signed by %q, ends %s, and the ledger counts %d one-sided", final.Signer, final.Outcome, res.Verify.OneSided)
	}

	// The provider comes back: the two settle.
	if err := c.Restart(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := sub.Receipts(context.Background(), j.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verify.OneSided == 0 && res.Verify.Disputed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled 60s after the provider came back: %+v", res.Verify)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f := waitFinal(t, c.Client(victim), j.ID)
	if f.Signer != "" || len(f.SubmitterSig) == 0 {
		t.Fatalf("the provider's final record is not signed by both: signer %q", f.Signer)
	}
}

// An output and a checkpoint with links: links inside come back as links,
// links out are left out and named in the status, every file comes back.
func TestOutputKeepsLinks(t *testing.T) {
	c := start(t, cluster.Options{N: 2, SimGPUsByNode: []string{"", "1xH100:80GiB"}, Heartbeat: 500 * time.Millisecond, Args: []string{"--epoch", "250ms"}})
	sub := c.Client(0)
	script := `echo ok > /out/ok; mkdir /out/models; echo w > /out/models/epoch_10.pt
ln -s models/epoch_10.pt /out/latest.pt; ln -s /etc/passwd /out/passwd; ln -s / /out/root; ln -s ../../x /out/up
echo 3 > /ckpt/n; ln -s n /ckpt/latest; ln -s /root /ckpt/home; sleep 2`
	d := decl("links", script, 1, time.Minute)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(500)}
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("ended %s/%s: %s", j.Outcome, j.Attribution, j.Reason)
	}
	if len(j.Skipped) != 3 {
		t.Fatalf("status names %d left-out entries, want the 3 links out: %v", len(j.Skipped), j.Skipped)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "latest.pt")); err != nil || string(b) != "w\n" {
		t.Fatalf("latest.pt through its link: %q %v", b, err)
	}
	if target, _ := os.Readlink(filepath.Join(out, "out", "latest.pt")); target != "models/epoch_10.pt" {
		t.Fatalf("latest.pt is not the link it was: %q", target)
	}
	for _, name := range []string{"passwd", "root", "up"} {
		if _, err := os.Lstat(filepath.Join(out, "out", name)); err == nil {
			t.Fatalf("the link out %s came back", name)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "out", "ok")); string(b) != "ok\n" {
		t.Fatalf("ok: %q", b)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: ck, Checkpoint: true}); err != nil {
		t.Fatal(err)
	}
	if target, _ := os.Readlink(filepath.Join(ck, "latest")); target != "n" {
		t.Fatalf("checkpoint link latest -> %q", target)
	}
	if _, err := os.Lstat(filepath.Join(ck, "home")); err == nil {
		t.Fatal("the checkpoint's link out came back")
	}
}
