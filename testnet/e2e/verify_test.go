package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// TestReplicasCatchWrongOutput: a job with verify.replicas: 2 on a
// network where one provider changes a byte of every output
// (--misbehave wrong-output). A blocker holds the third provider's only
// GPU, so the two replicas go to the honest provider and the liar, which
// disagree; the blocker is withdrawn, a third replica runs on the third
// provider, and the majority wins: the job completes with the honest
// output, the liar's lease is lost (held, not owed) and the liar is
// distrusted, so that a later job never goes to it.
func TestReplicasCatchWrongOutput(t *testing.T) {
	b := byzantineBin(t)
	c := start(t, cluster.Options{
		N:             4,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xL4:24GiB", "1xH100:80GiB"},
		Misbehave:     []string{"", "", "", "wrong-output"},
		Heartbeat:     500 * time.Millisecond, Args: byzArgs, Bin: b,
	})
	sub := c.Client(0)
	honest, third, liar := c.Nodes[1].PeerID, c.Nodes[2].PeerID, c.Nodes[3].PeerID

	bd := decl("blocker", "sleep 600", 1, 20*time.Minute)
	bd.Request.GPUModel = "L4"
	blocker := submit(t, sub, bd)
	waitJob(t, sub, blocker.ID, time.Minute, "the blocker running on the L4", func(j api.Job) bool {
		return j.State == api.JobRunning && j.Provider == third
	})

	d := decl("replicated", "echo 42 > /out/answer", 1, time.Minute)
	d.Verify = &market.Verify{Replicas: 2}
	job := submit(t, sub, d)
	job = waitJob(t, sub, job.ID, 2*time.Minute, "a third replica after two that disagree", func(j api.Job) bool {
		return j.Verification != nil && len(j.Verification.Replicas) == 3
	})
	var first []string
	for _, r := range job.Verification.Replicas[:2] {
		first = append(first, r.Provider)
	}
	slices.Sort(first)
	want := []string{honest, liar}
	slices.Sort(want)
	if !slices.Equal(first, want) {
		t.Fatalf("the first two replicas ran on %v, want the honest provider and the liar %v", first, want)
	}
	if _, err := sub.Withdraw(context.Background(), blocker.ID); err != nil {
		t.Fatal(err)
	}

	job = waitJob(t, sub, job.ID, 3*time.Minute, "release", released)
	v := job.Verification
	if job.Outcome != "completed" || v == nil || v.State != "settled" {
		t.Fatalf("the replicated job ended %s (%s), verification %+v; want completed, settled by the majority", job.Outcome, job.Reason, v)
	}
	t.Logf("honest %s, third %s, liar %s", honest, third, liar)
	for _, r := range v.Replicas {
		t.Logf("replica %s on %s: %s %s output %s compared %s lost %t", r.ID, r.Provider, r.State, r.Outcome, r.Output, r.Compared, r.Lost)
	}
	var lostBy []string
	for _, r := range v.Replicas {
		if r.Lost {
			lostBy = append(lostBy, r.Provider)
		} else if r.Output != job.Output && r.Compared != v.Replicas[0].Compared && r.Provider == liar {
			t.Errorf("replica on the liar not marked lost: %+v", r)
		}
	}
	if !slices.Equal(lostBy, []string{liar}) {
		t.Fatalf("lost by %v, want the liar %s alone (%s)", lostBy, liar, v.Reason)
	}
	for _, r := range v.Replicas {
		if r.Provider == liar && r.Output == job.Output {
			t.Fatalf("the job's output %s is the liar's", job.Output)
		}
	}
	if got := readOutputFile(t, sub, job.ID, "answer"); got != "42\n" {
		t.Fatalf("the job's answer is %q, want the honest 42", got)
	}

	// The liar's lease is held and not owed; the others are owed.
	for _, tot := range usage(t, sub).ByPeer {
		switch tot.Peer.String() {
		case liar:
			if tot.Owed != 0 {
				t.Errorf("the liar is owed %v GPU-hours after losing the check", tot.Owed)
			}
		case honest, third:
			if tot.Owed == 0 && tot.GPUHours > 0 {
				t.Errorf("provider %s, whose replica won, is owed nothing", tot.Peer)
			}
		}
	}

	// Distrusted: a later job never goes to the liar, however Match
	// places it first.
	for i := range 3 {
		j := submit(t, sub, decl(fmt.Sprintf("after-%d", i), "echo ok > /out/ok", 1, time.Minute))
		j = waitJob(t, sub, j.ID, 2*time.Minute, "release", released)
		if j.Provider == liar || j.Outcome != "completed" {
			t.Fatalf("a later job ended %s on %s; the distrusted liar is %s", j.Outcome, j.Provider, liar)
		}
	}
}

// TestSpotChecksCatchNoWork: a 200-task array with verify.spot: 0.1 on a
// network where one provider returns an empty output at once without
// running anything (--misbehave no-work). Its speed wins it most tasks,
// and a tenth of the tasks are run again elsewhere: a check catches it
// (the chance that none of its tasks is drawn is 0.9 to the power of
// their number, below 1e-6 for the 130 or more it takes here), and every
// task it returned runs again on an honest provider. The array completes
// with each task's own output.
func TestSpotChecksCatchNoWork(t *testing.T) {
	b := byzantineBin(t)
	c := start(t, cluster.Options{
		N:             4,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "2xH100:80GiB", "4xH100:80GiB"},
		Misbehave:     []string{"", "", "", "no-work"},
		Heartbeat:     500 * time.Millisecond, Args: byzArgs, Bin: b,
	})
	sub := c.Client(0)
	liar := c.Nodes[3].PeerID

	d := decl("spot", "echo $E31_TASK_INDEX > /out/index", 1, time.Minute)
	d.Array = &market.Array{Count: 200}
	d.Verify = &market.Verify{Spot: 0.1}
	arr := submit(t, sub, d)
	arr = waitJob(t, sub, arr.ID, 15*time.Minute, "release", released)
	v := arr.Verification
	if arr.Outcome != "completed" || v == nil {
		t.Fatalf("the array ended %s (%s), verification %+v", arr.Outcome, arr.Reason, v)
	}
	t.Logf("spot checks: %d drawn, caught %v, %d tasks run again: %s", v.Checks, v.Caught, v.Rerun, v.Reason)
	if !slices.Contains(v.Caught, liar) || v.Rerun == 0 {
		t.Fatalf("the spot checks did not catch the no-work provider %s: %+v", liar, v)
	}
	for i := range 200 {
		tj, err := sub.Job(context.Background(), market.TaskID(arr.ID, i))
		if err != nil {
			t.Fatal(err)
		}
		if tj.Provider == liar || tj.Outcome != "completed" {
			t.Fatalf("task %d ended %s on %s; the caught provider is %s", i, tj.Outcome, tj.Provider, liar)
		}
		if got := readOutputFile(t, sub, tj.ID, "index"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("task %d's output says %q", i, got)
		}
	}
}

// readOutputFile fetches a job's output into a folder of the test's and
// reads one file of its out folder.
func readOutputFile(t *testing.T, cl *api.Client, id, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "o")
	if _, err := cl.Get(context.Background(), id, api.GetRequest{Dir: dir}); err != nil {
		t.Fatalf("get job %s: %v", id, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", name))
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return string(b)
}

// TestArrayReplicasWithAComparator: an array whose every task runs on two
// distinct providers (verify.replicas: 2), compared by the user's own
// comparator (verify.compare.command): each run writes its task's value
// and the time, so the outputs differ byte for byte, and the comparator,
// a CPU job of its own over the two outputs mounted at /a and /b, accepts
// them when the values match. The array completes once every task's check
// agreed, and its status counts the checks.
func TestArrayReplicasWithAComparator(t *testing.T) {
	c := start(t, cluster.Options{
		N:             4,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
	})
	sub := c.Client(0)
	d := decl("compared", `echo "$E31_TASK_INDEX $(date +%s%N)" > /out/v`, 1, time.Minute)
	d.Array = &market.Array{Count: 4}
	d.Verify = &market.Verify{Replicas: 2, Compare: &market.Compare{
		Command: []string{"sh", "-c", `read a x < /a/v && read b y < /b/v && [ "$a" = "$b" ]`}}}
	arr := submit(t, sub, d)
	arr = waitJob(t, sub, arr.ID, 5*time.Minute, "release", released)
	v := arr.Verification
	if arr.Outcome != "completed" || v == nil || v.State != "agreed" || v.Checks != 4 || v.Mode != "command" {
		t.Fatalf("the array ended %s (%s), verification %+v; want completed, 4 checks by the comparator agreed", arr.Outcome, arr.Reason, v)
	}
	if h := arr.Held; h == nil || h.VerificationGPUHours <= 0 || h.VerificationGPUHours >= h.GPUHours {
		t.Fatalf("held %+v: want the replicas' share of it above 0 and below the whole", h)
	}
	// Each run wrote the time too: the outputs differ byte for byte, and
	// only the comparator calls them the same result.
	var outs []string
	for i := range 4 {
		outs = append(outs, readOutputFile(t, sub, market.TaskID(arr.ID, i), "v"))
	}
	t.Logf("the tasks' outputs: %q", outs)
	for i := range 4 {
		tj, err := sub.Job(context.Background(), market.TaskID(arr.ID, i))
		if err != nil {
			t.Fatal(err)
		}
		if tj.Outcome != "completed" {
			t.Fatalf("task %d ended %s", i, tj.Outcome)
		}
	}
	for _, j := range listJobs(t, sub) {
		if j.ID != arr.ID {
			t.Errorf("job %s (%s) is listed beside the array: replicas and comparators are shown within it", j.ID, j.Name)
		}
	}
}

// listJobs is node 0's list of jobs.
func listJobs(t *testing.T, cl *api.Client) []api.Job {
	t.Helper()
	js, err := cl.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return js
}
