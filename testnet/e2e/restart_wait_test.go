package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	"github.com/e31network/e31/testnet/cluster"
)

// The submitter's own daemon, which provides GPUs too, stopped with
// SIGTERM (as systemctl stop does) and started again at random moments,
// several times, while an array runs on it and on two other providers:
// e31 wait, started before the first stop, says the daemon is away and
// back, outlasts every restart and exits 0; the array completes, and each
// index completed once and wrote its own output. Whatever each stop cut
// on the node itself (a lease running, a task's resumption being made) is
// taken up again after the start, never recorded as the array's failure,
// and the node's view of the queue after the start does not hold its
// ended tasks open (which stalled the array: its Match, which judges the
// proposals of its tasks, gave out ended ones and refused the rest).
//
// The array has 200 tasks, as in the report this test comes from (50
// with -short; E31_RESTART_TASKS sets another count), and a run
// restarts the daemon ten times in a row, as the report asked (3 with
// -short; E31_RESTARTS sets another count). E31_RESTART_SEED replays the
// moments of a run whose seed its log gave.
func TestWaitOutlastsRestartsOfItsDaemon(t *testing.T) {
	n := jobCount(t, "E31_RESTART_TASKS", 50, 200)
	restarts := jobCount(t, "E31_RESTARTS", 3, 10)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("E31_RESTART_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("E31_RESTART_SEED=%q: want a number", s)
		}
		seed = v
	}
	t.Logf("%d tasks, %d restarts, seed %d (E31_RESTART_SEED=%d replays the moments)", n, restarts, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	c := start(t, cluster.Options{N: 3, GPUs: 2, Metrics: true, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	got, code := runE31(t, ctx, api0, "submit", "--name", "sweep", "--array", fmt.Sprintf("0-%d", n-1), "--gpus", "1", "--limit", "1m", "--",
		"sh", "-c", `sleep 0.5; echo "$E31_TASK_INDEX" > /out/i`)
	if code != 0 {
		t.Fatalf("e31 submit --array: exit %d\n%s", code, got)
	}
	id := strings.TrimSpace(strings.SplitN(got, "\n", 2)[0])

	// e31 wait as its user runs it, asking every 200ms so that it asks
	// while the daemon is away.
	var waitOut lockedBuffer
	wait := exec.CommandContext(ctx, bin.E31, "--api", api0, "wait", id, "--poll", "200ms")
	wait.Stdout, wait.Stderr = &waitOut, &waitOut
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- wait.Wait() }()

	// The moments: after a random share of the tasks has completed, once
	// node0 runs a lease of its own, and a random pause more, so that a
	// stop falls anywhere in a task's life on the node (proposed, staging,
	// running, returning its output) and in its resumption's.
	at := make([]int, restarts)
	for i := range at {
		at[i] = 1 + rng.IntN(max(n*3/4, 1))
	}
	slices.Sort(at)
	for i, done := range at {
		what := fmt.Sprintf("%d tasks completed and a lease running on node0", done)
		j := waitJob(t, c.Client(0), id, 3*time.Minute, what, func(j api.Job) bool {
			if j.State.Terminal() {
				return true
			}
			if j.Tasks == nil || j.Tasks.Completed < done {
				return false
			}
			return scrape(t, c.Nodes[0].Metrics)["e31_leases_active"] > 0
		})
		if j.State.Terminal() {
			t.Fatalf("the array ended %s (%+v) before restart %d of %d", j.Outcome, j.Tasks, i+1, restarts)
		}
		pause := time.Duration(rng.IntN(1000)) * time.Millisecond
		time.Sleep(pause) // a random moment, not a wait for a condition
		t.Logf("restart %d: stopping node0 %s after %d of %d tasks had completed", i+1, pause, done, n)
		if !c.Nodes[0].StopWithin(time.Minute) {
			t.Fatalf("restart %d: node0 did not stop within a minute of SIGTERM", i+1)
		}
		if err := c.Restart(ctx, 0); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
	}

	select {
	case err := <-waited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("e31 wait exited %d, want 0\n%s", ee.ExitCode(), waitOut.String())
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("e31 wait has not returned 4 minutes after the last restart\n%s", waitOut.String())
	}
	said := waitOut.String()
	if !strings.Contains(said, "does not answer (restarting?); asking again") || !strings.Contains(said, "answers again after") {
		t.Fatalf("e31 wait did not say the daemon was away and back:\n%s", said)
	}
	if !strings.Contains(said, id+"  sweep  completed") {
		t.Fatalf("e31 wait did not print the array's end:\n%s", said)
	}

	sub := c.Client(0)
	j, err := sub.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Tasks == nil || j.Tasks.Completed != n || j.Tasks.Failed != 0 {
		t.Fatalf("the array ended %s (%s) with tasks %+v, want %d completed", j.Outcome, j.Reason, j.Tasks, n)
	}
	// Each index once: one completed attempt, whatever the restarts cut.
	preempted := 0
	for i := range n {
		task, err := sub.Job(ctx, market.TaskID(id, i))
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		completed := 0
		for _, a := range task.Attempts {
			switch a.Outcome {
			case string(ledger.OutcomeCompleted):
				completed++
			case string(ledger.OutcomePreempted):
				preempted++
			}
		}
		if len(task.Attempts) == 0 && task.Outcome == string(ledger.OutcomeCompleted) {
			completed = 1 // its one attempt, not listed apart
		}
		if task.Outcome != string(ledger.OutcomeCompleted) || completed != 1 {
			t.Fatalf("task %d ended %s (%s) with %d completed attempts: %+v", i, task.Outcome, task.Reason, completed, task.Attempts)
		}
	}
	b, _ := os.ReadFile(filepath.Join(c.Nodes[0].Data, "e31d.log"))
	t.Logf("%d attempts preempted by the stops; node0 drained leases at %d of its %d stops", preempted,
		strings.Count(string(b), "draining the leases before stopping"), restarts)
	dir := filepath.Join(t.TempDir(), "sweep")
	if got, code := runE31(t, ctx, api0, "get", id, "-o", dir); code != 0 {
		t.Fatalf("e31 get of the array: exit %d\n%s", code, got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != n {
		t.Fatalf("e31 get wrote %d folders, want %d: %v", len(entries), n, err)
	}
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "i"))
		if err != nil || string(b) != strconv.Itoa(i)+"\n" {
			t.Fatalf("task %d wrote %q, %v", i, b, err)
		}
	}
}
