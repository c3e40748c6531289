package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/testnet/cluster"
)

// bin holds the commands, built once for the package.
var bin cluster.Binaries

// tokenFile holds the API token every cluster's nodes are given (start),
// made once for the package; every e31 a test runs finds it through
// $E31_API_TOKEN_FILE.
var tokenFile string

func TestMain(m *testing.M) {
	var remove func()
	var err error
	bin, remove, err = cluster.BuildTemp(context.Background())
	if err != nil {
		panic(err)
	}
	tokenDir, err := os.MkdirTemp("", "e31-e2e-token-")
	if err != nil {
		panic(err)
	}
	tokenFile = filepath.Join(tokenDir, api.TokenFile)
	if _, err := apiserver.LoadOrCreateToken(tokenFile); err != nil {
		panic(err)
	}
	if err := os.Setenv("E31_API_TOKEN_FILE", tokenFile); err != nil {
		panic(err)
	}
	code := m.Run()
	remove()
	os.RemoveAll(tokenDir)
	os.Exit(code)
}

// jobCount is how many jobs a load test submits: the environment variable
// env if set, else short with -short, else full.
func jobCount(t *testing.T, env string, short, full int) int {
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", env, s)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return full
}

// progress is how many jobs a load test has seen end at most, and when
// that number last grew: a test waits while it grows, and fails once it
// stalls.
type progress struct {
	best int
	at   time.Time
}

func newProgress() progress { return progress{best: -1, at: time.Now()} }

// note records that done jobs have ended by now.
func (p *progress) note(done int) {
	if done > p.best {
		p.best, p.at = done, time.Now()
	}
}

// stalled reports whether no more jobs have ended for d.
func (p *progress) stalled(d time.Duration) bool { return time.Since(p.at) > d }

// requireSandbox skips (or, in CI, fails) where jobs cannot run.
func requireSandbox(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("runc")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	msg := "end-to-end jobs need root and runc (apt-get install -y runc)"
	if os.Getenv("E31_REQUIRE_RUNC") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func start(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	requireSandbox(t)
	opts.Bin.E31d, opts.Bin.E31 = bin.E31d, bin.E31 // a byzantine e31d, if any, is the caller's
	if opts.Dir == "" {
		opts.Dir = t.TempDir() // else the caller's, with what it laid out there (a data dir's own filesystem)
	}
	opts.TokenFile = tokenFile
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: this one after c.Stop, for a panic while
	// stopping, which the check on live daemons below cannot see.
	seen := 0
	t.Cleanup(func() {
		if lines := c.Panics(); len(lines) > seen {
			t.Errorf("a daemon panicked while stopping:\n%s", strings.Join(lines[seen:], "\n"))
		}
	})
	t.Cleanup(c.Stop)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Cleanups run last first: the logs are read before c.Stop.
		for _, n := range c.Nodes {
			b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
			if err != nil {
				continue
			}
			// Debug lines, where a test turns them on, would bury the rest.
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if !strings.Contains(l, "level=DEBUG") {
					lines = append(lines, l)
				}
			}
			t.Logf("last lines of %s's log, but for debug lines:\n%s", n.Name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	// Registered after the dump, so run before it (and before c.Stop, on
	// live daemons): a test in which a daemon panicked fails, and the dump
	// shows the logs around it.
	t.Cleanup(func() { seen = checkNoPanics(t, c, opts.Metrics) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkNoPanics fails the test if any daemon of c panicked, recovered or
// not: the recovery at the daemon's boundaries is a safety net, and a
// test that fell into it found a bug. With metrics it also reads each
// live daemon's e31_panics_total, which counts what its log records.
func checkNoPanics(t *testing.T, c *cluster.Cluster, metrics bool) (lines int) {
	t.Helper()
	found := c.Panics()
	if len(found) > 0 {
		t.Errorf("a daemon panicked:\n%s", strings.Join(found, "\n"))
	}
	if !metrics {
		return len(found)
	}
	for _, n := range c.Nodes {
		if !n.Alive() || n.Metrics == "" {
			continue
		}
		for series, v := range scrape(t, n.Metrics) {
			if strings.HasPrefix(series, "e31_panics_total{") && v > 0 {
				t.Errorf("%s: %s = %v, want 0", n.Name, series, v)
			}
		}
	}
	return len(found)
}

func submit(t *testing.T, cl *api.Client, d market.Declaration) api.Job {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := cl.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// decl builds a declaration that runs a shell script.
func decl(name, script string, gpus int, limit time.Duration) market.Declaration {
	d := market.NewDeclaration(name, []string{"sh", "-c", script}, gpus, market.Duration(limit.Milliseconds()), nil)
	d.Request.Memory = 256 * market.MiB
	return d
}

// waitJob polls a job until cond holds, failing the test at the deadline.
func waitJob(t *testing.T, cl *api.Client, id string, d time.Duration, what string, cond func(api.Job) bool) api.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var j api.Job
	for {
		var err error
		j, err = cl.Job(ctx, id)
		if err == nil && cond(j) {
			return j
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: timed out waiting for %s; last: %+v (err %v)", id, what, j, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func released(j api.Job) bool { return j.State == api.JobReleased }

func stepNames(j api.Job) []string {
	var out []string
	for _, s := range j.Steps {
		out = append(out, string(s.Step))
	}
	return out
}

func stepAt(j api.Job, name api.StepName) time.Time {
	for _, s := range j.Steps {
		if s.Step == name {
			return s.At
		}
	}
	return time.Time{}
}

// receipts returns a node's receipts of a job, and checks that its ledger
// verifies.
func receipts(t *testing.T, cl *api.Client, job string) []ledger.Receipt {
	t.Helper()
	res, err := cl.Receipts(context.Background(), job, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verify == nil || !res.Verify.OK {
		t.Fatalf("ledger does not verify: %+v", res.Verify)
	}
	var rs []ledger.Receipt
	if err := json.Unmarshal(res.Receipts, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

func finalOf(t *testing.T, rs []ledger.Receipt) ledger.Receipt {
	t.Helper()
	// A receipt both signed supersedes a side's own record of the lease.
	var finals, oneSided []ledger.Receipt
	for _, r := range rs {
		switch {
		case r.Final && r.Signer == "":
			finals = append(finals, r)
		case r.Final:
			oneSided = append(oneSided, r)
		}
	}
	if len(finals) == 0 {
		finals = oneSided
	}
	if len(finals) != 1 {
		t.Fatalf("want exactly one final receipt, got %d of %d", len(finals), len(rs))
	}
	return finals[0]
}

// waitFinal waits for the one final receipt of a job in a node's ledger: a
// provider stores it after the submitter, which may already say released.
func waitFinal(t *testing.T, cl *api.Client, job string) ledger.Receipt {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs := receipts(t, cl, job)
		for _, r := range rs {
			if r.Final {
				return finalOf(t, rs)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final receipt of job %s within 30s; %d receipts", job, len(rs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAllFree waits until every node's view shows every GPU free.
func waitAllFree(t *testing.T, c *cluster.Cluster, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		busy := ""
		for i := range c.Nodes {
			nodes, err := c.Client(i).Nodes(ctx)
			if err != nil {
				busy = err.Error()
				break
			}
			for _, n := range nodes {
				for _, g := range n.GPUs {
					if !g.Free {
						busy = fmt.Sprintf("node%d sees %s held on %s", i, g.UUID, n.PeerID)
					}
				}
			}
		}
		if busy == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GPUs not all free again: %s", busy)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// The daemons these tests run are built from the module's sources.
func TestSourcesTracked(t *testing.T) { cluster.StatSources() }

// randomInput writes size random bytes to the file name in a new folder
// and returns the folder and the bytes: a job's input.
func randomInput(t *testing.T, name string, size int) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// runE31 runs the e31 command against the daemon at api, as its user
// does, and returns what it printed and its exit status; a command that
// could not be run at all fails the test. It runs in a folder of its own,
// so that what a command writes by default (submit --wait's ./JOB-out)
// stays out of the source tree.
func runE31(t *testing.T, ctx context.Context, api string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin.E31, append([]string{"--api", api}, args...)...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("e31 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0
}
