package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	e31exec "github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// bin holds the commands built once for every test in the package.
var bin cluster.Binaries

func TestMain(m *testing.M) {
	var remove func()
	var err error
	bin, remove, err = cluster.BuildTemp(context.Background())
	if err != nil {
		panic(err)
	}
	code := m.Run()
	remove()
	os.Exit(code)
}

func start(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	opts.Bin = bin
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	// Cleanups run last first: the logs are read before c.Stop. A daemon
	// that panicked, recovered or not, has a bug the test found.
	t.Cleanup(func() {
		if lines := c.Panics(); len(lines) > 0 {
			t.Errorf("a daemon panicked:\n%s", strings.Join(lines, "\n"))
		}
	})
	return c
}

func TestTenNodesConvergeAndDropKilledNode(t *testing.T) {
	hb := 300 * time.Millisecond
	c := start(t, cluster.Options{N: 10, GPUs: 2, Heartbeat: hb})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}

	victim := c.Nodes[7]
	if err := c.Kill(7); err != nil {
		t.Fatal(err)
	}
	// It must not leave a view before three of its heartbeats have passed
	// unseen: watch one view until it drops the victim, keeping the last
	// time it had heard from it.
	var lastSeen, gone time.Time
	for gone.IsZero() {
		nodes, err := c.Client(0).Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gone = time.Now()
		for _, n := range nodes {
			if n.PeerID == victim.PeerID {
				lastSeen, gone = n.LastSeen, time.Time{}
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the killed node never left the view")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if silent := gone.Sub(lastSeen); !lastSeen.IsZero() && silent < 3*hb {
		t.Fatalf("killed node left the view %s after it was last heard from, before 3 heartbeats of %s", silent, hb)
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		nodes, err := c.Client(i).Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range nodes {
			if p.PeerID == victim.PeerID {
				t.Fatalf("%s still lists the killed node", n.Name)
			}
		}
	}
}

func TestIdentitySurvivesRestart(t *testing.T) {
	c := start(t, cluster.Options{N: 1, GPUs: 1})
	before := c.Nodes[0].PeerID
	beforeGPUs := gpuUUIDs(t, c.Client(0))
	if err := c.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if c.Nodes[0].PeerID != before {
		t.Fatalf("peer ID changed across restart: %s -> %s", before, c.Nodes[0].PeerID)
	}
	// Simulated GPU UUIDs derive from the peer ID, so they stay too.
	if after := gpuUUIDs(t, c.Client(0)); after[0] != beforeGPUs[0] {
		t.Fatalf("GPU UUIDs changed: %v -> %v", beforeGPUs, after)
	}
}

func gpuUUIDs(t *testing.T, cl *api.Client) []string {
	t.Helper()
	id, err := cl.ID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range id.GPUs {
		out = append(out, g.UUID)
	}
	if len(out) == 0 {
		t.Fatal("node has no GPUs")
	}
	return out
}

func TestCorruptIdentityRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "node0")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "identity.key"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := cluster.Start(context.Background(), cluster.Options{N: 1, Dir: dir, Bin: bin})
	if err == nil {
		t.Fatal("node started with a corrupt identity key")
	}
	log, _ := os.ReadFile(filepath.Join(data, "e31d.log"))
	if !contains(string(log), "corrupt") {
		t.Fatalf("log does not say the key is corrupt:\n%s", log)
	}
}

func TestDownStopsDetachedNodes(t *testing.T) {
	dir := t.TempDir()
	c, err := cluster.Start(context.Background(), cluster.Options{N: 2, GPUs: 1, Dir: dir, Bin: bin, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.StopDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("stopped %d nodes, want 2", n)
	}
	for _, nd := range c.Nodes {
		deadline := time.Now().Add(10 * time.Second)
		for nd.Alive() {
			if time.Now().After(deadline) {
				t.Fatalf("%s still running after down", nd.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// The CLI says why and exits non-zero when no daemon answers, and every
// verb has help.
func TestCLIWithoutDaemon(t *testing.T) {
	cmd := exec.Command(bin.E31, "--api", filepath.Join(t.TempDir(), "none.sock"), "nodes")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3; output %s", err, out)
	}
	if !strings.Contains(string(out), "no e31d answers") {
		t.Fatalf("no reason given: %s", out)
	}
	for _, verb := range []string{"id", "peers", "nodes", "submit", "status", "list", "withdraw", "get", "resume", "receipts", "usage", "verify"} {
		out, err := exec.Command(bin.E31, verb, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") {
			t.Fatalf("e31 %s --help: %v\n%s", verb, err, out)
		}
	}
}

// A clean stop (SIGTERM) removes the run file; flags in a config file are
// used, and flags on the command line win over them.
func TestConfigFileAndCleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "e31d.toml")
	if err := os.WriteFile(cfg, []byte("sim-gpus = \"3xL4:24GiB\"\nnetwork = \"from-file\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := start(t, cluster.Options{N: 1, Dir: dir, Args: []string{"--config", cfg, "--network", "from-flag"}})
	id, err := c.Client(0).ID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(id.GPUs) != 3 || id.GPUs[0].Model != "L4" || id.Network != "from-flag" {
		t.Fatalf("config not applied: %d GPUs of %q on network %q", len(id.GPUs), id.GPUs[0].Model, id.Network)
	}
	c.Stop()
	if _, err := os.Stat(filepath.Join(c.Nodes[0].Data, "run.json")); !os.IsNotExist(err) {
		t.Fatalf("run.json left after a clean stop: %v", err)
	}
}

// The daemons these tests run are built from the module's sources.
func TestSourcesTracked(t *testing.T) { cluster.StatSources() }

// TestDownSweepsWhatAKilledNodeLeft: a node killed while its job runs
// leaves the job's disk mounted under its data directory and its sandbox's
// run directory; down sweeps both, so that the testnet's directory can be
// deleted.
func TestDownSweepsWhatAKilledNodeLeft(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: jobs run in runc sandboxes on disks of their own")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("needs runc")
	}
	dir := t.TempDir()
	c := start(t, cluster.Options{N: 1, GPUs: 1, Dir: dir, Args: []string{"--epoch", "250ms"}})
	if err := c.WriteNodesFile(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	decl, err := json.Marshal(market.NewDeclaration("sleeper", []string{"sleep", "600"}, 1, market.Duration(600_000), nil))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client(0)
	j, err := cl.Submit(ctx, api.SubmitRequest{Declaration: decl}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for j.State != api.JobRunning {
		if j.State.Terminal() {
			t.Fatalf("job ended %s before it was killed: %s", j.Outcome, j.Reason)
		}
		if j, err = cl.NextJob(ctx, j, 5*time.Second, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	data := c.Nodes[0].Data
	mounted := func() []string {
		info, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var under []string
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], data+"/") {
				under = append(under, f[4])
			}
		}
		return under
	}
	if len(mounted()) == 0 {
		t.Fatal("the running job has no disk mounted under the node's data directory")
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if len(mounted()) == 0 {
		t.Fatal("the killed node's job disk went with it: nothing to sweep")
	}
	if _, err := cluster.StopDir(dir); err != nil {
		t.Fatal(err)
	}
	if m := mounted(); len(m) > 0 {
		t.Fatalf("still mounted after down: %v", m)
	}
	if runDir := e31exec.RunDirOf(data); !gone(runDir) {
		t.Fatalf("the sandbox's run directory is still there after down, holding %v", filesUnder(runDir))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("the testnet's directory cannot be deleted after down: %v", err)
	}
}

// gone reports whether nothing is at path.
func gone(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, os.ErrNotExist)
}

// filesUnder lists what is under dir, for failure messages.
func filesUnder(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}
