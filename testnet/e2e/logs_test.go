package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// `e31 logs -f` on the submitter prints a running job's lines as the job
// writes them, straight from the provider, and exits when the run is over.
// The job writes until the test lets it stop, so every line the test reads
// before that was followed live.
func TestLogsFollowRunningJob(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--grace", "1s"},
	})
	sub := c.Client(0)
	j := submit(t, sub, decl("chatty", `i=0; while [ ! -e /out/stop ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; echo "stopped after $i"`, 1, 5*time.Minute))
	j = waitJob(t, sub, j.ID, 60*time.Second, "the run to start", func(j api.Job) bool { return j.State == api.JobRunning })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "logs", "-f", j.ID)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("e31 logs -f ended early; stderr: %s", stderr.String())
			}
			return l
		case <-ctx.Done():
			t.Fatal("no line from e31 logs -f")
		}
		return ""
	}
	for i, want := range []string{"line 0", "line 1", "line 2", "line 3"} {
		if got := next(); got != want {
			t.Fatalf("line %d is %q, want %q", i, got, want)
		}
	}
	if j, err := sub.Job(ctx, j.ID); err != nil || j.State != api.JobRunning {
		t.Fatalf("job %s while its lines were followed (err %v), want running", j.State, err)
	}

	// Let the job end: its output folder on the provider is its /out, on
	// the job's own disk where the provider can make one.
	prov := providerData(t, c, j.Provider)
	outDir := filepath.Join(prov, "leases", j.Lease, "disk", "out")
	if _, err := os.Stat(outDir); err != nil {
		outDir = filepath.Join(prov, "leases", j.Lease, "out")
	}
	if err := os.WriteFile(filepath.Join(outDir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	last := ""
	for l := range lines {
		last = l
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("e31 logs -f: %v; stderr: %s", err, stderr.String())
	}
	if !strings.HasPrefix(last, "stopped after ") {
		t.Fatalf("last line %q, want the job's own last line", last)
	}

	// After release the log comes from the returned output, whole.
	waitJob(t, sub, j.ID, 60*time.Second, "release", released)
	b, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "logs", "--tail", "1", j.ID).Output()
	if err != nil || strings.TrimSpace(string(b)) != last {
		t.Fatalf("e31 logs --tail 1 after release = %q, %v; want %q", b, err, last)
	}
}

// providerData is the data dir of the node with the given peer ID.
func providerData(t *testing.T, c *cluster.Cluster, id string) string {
	t.Helper()
	for _, n := range c.Nodes {
		if n.PeerID == id {
			return n.Data
		}
	}
	t.Fatalf("no node %s", id)
	return ""
}
