package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// lifecycleNet is three nodes: node0 only submits, node1 and node2 offer two
// simulated GPUs each.
func lifecycleNet(t *testing.T) *cluster.Cluster {
	return start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s"},
		Metrics:       true,
	})
}

// providerClient returns the client of the node with the given peer ID.
func providerClient(t *testing.T, c *cluster.Cluster, id string) *api.Client {
	t.Helper()
	for i, n := range c.Nodes {
		if n.PeerID == id {
			return c.Client(i)
		}
	}
	t.Fatalf("no node %s", id)
	return nil
}

// checkReleased checks what every ending has in common: the steps in order,
// one final receipt on both sides that both ledgers verify, and held time
// equal to the lease's wall time.
func checkReleased(t *testing.T, c *cluster.Cluster, j api.Job, outcome, attribution string) {
	t.Helper()
	if j.State != api.JobReleased || j.Outcome != outcome || j.Attribution != attribution {
		t.Fatalf("job ended %s/%s/%s, want released/%s/%s (reason %q)", j.State, j.Outcome, j.Attribution, outcome, attribution, j.Reason)
	}
	names := stepNames(j)
	want := []string{"submit", "rent", "run", "output", "release"}
	if outcome == "failed" && !slices.Contains(names, "run") {
		want = []string{"submit", "rent", "output", "release"}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("steps %v, want %v", names, want)
	}
	for i := 1; i < len(j.Steps); i++ {
		if j.Steps[i].At.Before(j.Steps[i-1].At) {
			t.Fatalf("step %s before %s", j.Steps[i].Step, j.Steps[i-1].Step)
		}
	}
	sub := waitFinal(t, c.Client(0), j.ID)
	prov := waitFinal(t, providerClient(t, c, j.Provider), j.ID)
	if string(sub.ProviderSig) != string(prov.ProviderSig) || string(sub.SubmitterSig) != string(prov.SubmitterSig) {
		t.Fatal("the two sides keep different final receipts")
	}
	if string(sub.Outcome) != outcome || string(sub.Attribution) != attribution || sub.Provider.String() != j.Provider {
		t.Fatalf("final receipt says %s/%s by %s", sub.Outcome, sub.Attribution, sub.Provider)
	}
	if sub.GPUs != len(j.GPUs) || len(j.GPUs) == 0 {
		t.Fatalf("receipt counts %d GPUs, job holds %v", sub.GPUs, j.GPUs)
	}
	// The meter runs inside the lease as the submitter saw it: it starts
	// after the submitter countersigned (rent) and stops before the final
	// receipt reached it (release). Both clocks are this machine's.
	const skew = 50 * time.Millisecond
	if rent, rel := stepAt(j, "rent"), stepAt(j, "release"); sub.HeldFrom.Before(rent.Add(-skew)) || sub.HeldUntil.After(rel.Add(skew)) {
		t.Fatalf("receipt holds %s..%s, outside the lease's %s..%s", sub.HeldFrom, sub.HeldUntil, rent, rel)
	}
	if run := stepAt(j, "run"); !run.IsZero() && (run.Before(sub.HeldFrom.Add(-skew)) || run.After(sub.HeldUntil.Add(skew))) {
		t.Fatalf("the run started at %s, outside the held %s..%s", run, sub.HeldFrom, sub.HeldUntil)
	}
	ph := sub.Phases
	if sum := time.Duration((ph.Staging + ph.Run + ph.Output) * float64(time.Second)); (sum - sub.Held()).Abs() > 10*time.Millisecond {
		t.Fatalf("phases %+v add to %s, held %s", ph, sum, sub.Held())
	}
}

func TestLifecycleEndings(t *testing.T) {
	c := lifecycleNet(t)
	sub := c.Client(0)
	// The endings run in parallel inside one group, so that the check
	// after it sees them all finished.
	t.Run("endings", func(t *testing.T) { lifecycleEndings(t, c, sub) })
	waitAllFree(t, c, 30*time.Second)

	// The metrics tell the same story: leases signed by the providers, the
	// jobs by state on the submitter, every GPU free again.
	var leases float64
	for i := 1; i < len(c.Nodes); i++ {
		m := scrape(t, c.Nodes[i].Metrics)
		leases += m["e31_leases_total"]
		if m[`e31_gpus{state="held"}`] != 0 || m[`e31_gpus{state="free"}`] != 2 {
			t.Fatalf("node%d metrics: gpus held %v free %v", i, m[`e31_gpus{state="held"}`], m[`e31_gpus{state="free"}`])
		}
	}
	m := scrape(t, c.Nodes[0].Metrics)
	if leases != m[`e31_jobs{state="released"}`] || leases < 4 {
		t.Fatalf("providers signed %v leases, the submitter has %v released jobs", leases, m[`e31_jobs{state="released"}`])
	}
	if m[`e31_jobs{state="withdrawn"}`] != 1 || m["e31_receipts_total"] < leases {
		t.Fatalf("submitter metrics: %v withdrawn, %v receipts", m[`e31_jobs{state="withdrawn"}`], m["e31_receipts_total"])
	}
}

// scrape reads a Prometheus endpoint into series -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func lifecycleEndings(t *testing.T, c *cluster.Cluster, sub *api.Client) {
	t.Run("completed with input, output and checkpoints", func(t *testing.T) {
		t.Parallel()
		in := t.TempDir()
		if err := os.WriteFile(filepath.Join(in, "in.txt"), []byte("input bytes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d := decl("count", "cat /data/in.txt > /out/copy.txt; for i in 1 2 3 4; do echo $i > /ckpt/count; sleep 0.5; done; echo finished", 1, time.Minute)
		d.Data = []market.Input{{Source: in, Mount: "/data"}}
		d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(400)}
		j := submit(t, sub, d)
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		checkReleased(t, c, j, "completed", "job")
		if j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("exit code %v", j.ExitCode)
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: out}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "out", "copy.txt")); string(b) != "input bytes\n" {
			t.Fatalf("output copy.txt = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "stdout.log")); !strings.Contains(string(b), "finished") {
			t.Fatalf("stdout.log = %q", b)
		}
		ck := filepath.Join(t.TempDir(), "ck")
		if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: ck, Checkpoint: true}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(ck, "count")); string(b) != "4\n" {
			t.Fatalf("last checkpoint count = %q, want 4", b)
		}
	})

	t.Run("failed with exit 3", func(t *testing.T) {
		t.Parallel()
		j := submit(t, sub, decl("fail", "echo oops >&2; exit 3", 1, time.Minute))
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		checkReleased(t, c, j, "failed", "job")
		if j.ExitCode == nil || *j.ExitCode != 3 {
			t.Fatalf("exit code %v, want 3", j.ExitCode)
		}
	})

	t.Run("killed for using all its memory", func(t *testing.T) {
		t.Parallel()
		// tail holds a line in memory until it ends, and /dev/zero has none.
		d := decl("hog", "head -c 512000000 /dev/zero | tail > /dev/null", 1, time.Minute)
		d.Request.Memory = 32 * market.MiB
		j := submit(t, sub, d)
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		checkReleased(t, c, j, "failed", "job")
		if want := "out of memory: used all of request.memory 32MiB"; j.Reason != want {
			t.Fatalf("reason %q, want %q", j.Reason, want)
		}
	})

	t.Run("stopped at its limit", func(t *testing.T) {
		t.Parallel()
		j := submit(t, sub, decl("slow", "sleep 60", 1, 2*time.Second))
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		checkReleased(t, c, j, "limit", "job")
	})

	t.Run("withdrawn while running", func(t *testing.T) {
		t.Parallel()
		// The job says it is ready (its trap set) in a first checkpoint;
		// the withdrawal waits for that, so the SIGTERM finds the trap.
		d := decl("endless", "trap 'echo stopped > /ckpt/last; exit 0' TERM; echo ready > /ckpt/ready; while true; do sleep 0.1; done", 1, time.Minute)
		d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(300)}
		j := submit(t, sub, d)
		waitJob(t, sub, j.ID, 60*time.Second, "run and a first checkpoint", func(j api.Job) bool { return j.State == api.JobRunning && j.Checkpoint != "" })
		if _, err := sub.Withdraw(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		checkReleased(t, c, j, "withdrawn", "submitter")
		// The job's last checkpoint, written on SIGTERM, came back.
		ck := filepath.Join(t.TempDir(), "ck")
		if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: ck, Checkpoint: true}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(ck, "last")); string(b) != "stopped\n" {
			t.Fatalf("last checkpoint = %q", b)
		}
	})

	t.Run("unsatisfiable job waits, says why, and is withdrawn owing nothing", func(t *testing.T) {
		t.Parallel()
		d := decl("h200", "true", 1, time.Minute)
		d.Request.GPUModel = "H200"
		j := submit(t, sub, d)
		j = waitJob(t, sub, j.ID, 30*time.Second, "a reason", func(j api.Job) bool { return strings.Contains(j.Reason, "H200") })
		if j.State != api.JobQueued {
			t.Fatalf("state %s", j.State)
		}
		w, err := sub.Withdraw(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.State != api.JobWithdrawn {
			t.Fatalf("state after withdraw %s", w.State)
		}
		if rs := receipts(t, sub, j.ID); len(rs) != 0 {
			t.Fatalf("a withdrawn queued job has %d receipts", len(rs))
		}
	})

	t.Run("bad declaration refused naming the field", func(t *testing.T) {
		t.Parallel()
		raw := json.RawMessage(`{"name":"x","work":{"command":["true"]},"request":{"gpus":-1,"cpus":1,"memory":"1GiB","limit":"0s"},"output":{"path":"out"}}`)
		_, err := sub.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
		if err == nil {
			t.Fatal("accepted")
		}
		for _, field := range []string{"request.gpus", "request.limit", "output.path"} {
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error does not name %s: %v", field, err)
			}
		}
		jobs, _ := sub.Jobs(context.Background())
		for _, j := range jobs {
			if j.Name == "x" {
				t.Fatal("a refused declaration left a job behind")
			}
		}
	})
}
