package e2e

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// An array on real daemons: one declaration, twelve tasks, at most three
// leased at once, each writing its index; e31 submit --wait follows the
// array to its end, e31 status counts its tasks, e31 get writes each
// task's output at DIR/<index>/out, and e31 list shows it as one row. An
// array of values from a file gives each task its value; withdrawing an
// array that cannot be placed withdraws every task.
func TestArrayRunsEachTaskOnce(t *testing.T) {
	c := start(t, cluster.Options{N: 3, GPUs: 2, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}

	got, code := e31("submit", "--wait", "--name", "sweep", "--array", "0-11%3", "--gpus", "1", "--limit", "1m", "--",
		"sh", "-c", `echo "task $E31_TASK_INDEX"; echo "$E31_TASK_INDEX of $E31_TASK_COUNT" > /out/i`)
	if code != 0 || !strings.Contains(got, "completed") {
		t.Fatalf("e31 submit --wait --array 0-11%%3: exit %d\n%s", code, got)
	}
	jobs, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Tasks == nil || jobs[0].Tasks.Completed != 12 {
		t.Fatalf("the node lists %d jobs, want the array alone with 12 tasks completed: %+v", len(jobs), jobs)
	}
	id := jobs[0].ID
	if d := jobs[0].Tasks.Done; len(d) != 12 || d[11].Done != 12 || d[0].At.Before(jobs[0].Submitted) {
		t.Fatalf("tasks done over time: %+v, want 12 points from submit on", d)
	}
	status, code := e31("status", id)
	if code != 0 || !strings.Contains(status, "12 tasks: 12 completed") || !strings.Contains(status, "released") ||
		!regexp.MustCompile(`held\s+\S+ on [23] providers, 0\.\d+ GPU-h`).MatchString(status) {
		t.Fatalf("e31 status of the array: exit %d\n%s", code, status)
	}
	list, _ := e31("list")
	if strings.Count(list, "sweep") != 1 || !strings.Contains(list, "released (12/12 tasks ended)") {
		t.Fatalf("e31 list shows the array as %d rows:\n%s", strings.Count(list, "sweep"), list)
	}
	dir := filepath.Join(t.TempDir(), "sweep")
	if got, code := e31("get", id, "-o", dir); code != 0 || !strings.Contains(got, "wrote 12 of 12 tasks") {
		t.Fatalf("e31 get of the array: exit %d\n%s", code, got)
	}
	for i := range 12 {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "i"))
		if err != nil || string(b) != strconv.Itoa(i)+" of 12\n" {
			t.Fatalf("task %d wrote %q, %v", i, b, err)
		}
	}
	// Every task keeps its own leases; usage of the array sums them.
	if got, code := e31("usage", "--job", id[:8]); code != 0 || !regexp.MustCompile(`job \S+: 1[2-9] leases`).MatchString(got) {
		t.Fatalf("e31 usage --job ARRAY: exit %d\n%s", code, got)
	}
	if got, code := e31("logs", id[:8], "--task", "3"); code != 0 || got != "task 3\n" {
		t.Fatalf("e31 logs ARRAY --task 3: exit %d\n%q", code, got)
	}
	task, err := sub.Job(ctx, market.TaskID(id, 7))
	if err != nil || task.Array != id || task.Index != 7 || task.Provider == "" {
		t.Fatalf("task 7 as a job: %+v, %v", task, err)
	}
	// What the array held is what its tasks held, summed.
	arr, err := sub.Job(ctx, id)
	if err != nil || arr.Held == nil {
		t.Fatalf("the array's held time: %+v, %v", arr.Held, err)
	}
	var sum float64
	for i := range 12 {
		tj, err := sub.Job(ctx, market.TaskID(id, i))
		if err != nil || tj.Held == nil || tj.Held.GPUHours <= 0 {
			t.Fatalf("task %d's held time: %+v, %v", i, tj.Held, err)
		}
		sum += tj.Held.GPUHours
	}
	if math.Abs(arr.Held.GPUHours-sum) > 1e-9 {
		t.Fatalf("the array held %v GPU-hours, its tasks %v", arr.Held.GPUHours, sum)
	}

	// Values from a file, one a task.
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "values.txt"), []byte("alpha\nbeta gamma\ndelta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	decl := `name: values
work: {command: [sh, -c, 'echo "$E31_TASK_VALUE" > /out/v']}
request: {gpus: 0, cpus: 1, limit: 1m}
output: {path: /out}
array: {values_file: values.txt}
`
	file := filepath.Join(work, "values.yaml")
	if err := os.WriteFile(file, []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	got, code = e31("submit", "--wait", file)
	if code != 0 {
		t.Fatalf("e31 submit --wait of an array of values: exit %d\n%s", code, got)
	}
	vid := arrayNamed(t, ctx, sub, "values")
	vdir := filepath.Join(t.TempDir(), "values")
	if got, code := e31("get", vid, "-o", vdir); code != 0 {
		t.Fatalf("e31 get of the array of values: exit %d\n%s", code, got)
	}
	for i, want := range []string{"alpha", "beta gamma", "delta"} {
		if b, err := os.ReadFile(filepath.Join(vdir, strconv.Itoa(i), "out", "v")); err != nil || string(b) != want+"\n" {
			t.Fatalf("task %d of the values array wrote %q, %v; want %q", i, b, err, want)
		}
	}

	// No offer has 8 GPUs: the tasks wait, and go with the array.
	got, code = e31("submit", "--name", "toolarge", "--array", "5", "--gpus", "8", "--limit", "1m", "--", "true")
	if code != 0 {
		t.Fatalf("e31 submit of an array that cannot be placed: exit %d\n%s", code, got)
	}
	big := arrayNamed(t, ctx, sub, "toolarge")
	if got, code := e31("withdraw", big, "--tasks", "1-2"); code != 0 || strings.Count(got, "withdrawn") != 2 {
		t.Fatalf("e31 withdraw ARRAY --tasks 1-2: exit %d\n%s", code, got)
	}
	if j, err := sub.Job(ctx, big); err != nil || j.Tasks.Withdrawn != 2 || j.Tasks.Queued != 3 {
		t.Fatalf("after withdrawing tasks 1-2: %+v, %v", j.Tasks, err)
	}
	if got, code := e31("withdraw", big); code != 0 {
		t.Fatalf("e31 withdraw of an array: exit %d\n%s", code, got)
	}
	j, err := sub.Job(ctx, big)
	if err != nil || j.Tasks == nil || j.Tasks.Withdrawn != 5 || !j.State.Terminal() {
		t.Fatalf("the withdrawn array: %+v, %v", j, err)
	}
}

// arrayNamed is the ID of the array of a name that cl's node lists.
func arrayNamed(t *testing.T, ctx context.Context, cl *api.Client, name string) string {
	t.Helper()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name == name && j.Tasks != nil {
			return j.ID
		}
	}
	t.Fatalf("no array named %s listed", name)
	return ""
}

// A provider killed mid-array: the tasks it held run again elsewhere, and
// the array completes with each index written once, by its own task.
func TestArrayProviderKilled(t *testing.T) {
	c := faultNet(t)
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	got, code := runE31(t, ctx, c.Nodes[0].API, "submit", "--name", "lossy", "--array", "6", "--gpus", "1", "--limit", "1m", "--",
		"sh", "-c", `sleep 2; echo "$E31_TASK_INDEX" > /out/i`)
	if code != 0 {
		t.Fatalf("e31 submit: exit %d\n%s", code, got)
	}
	id := arrayNamed(t, ctx, sub, "lossy")
	var victim int
	waitJob(t, sub, id, time.Minute, "a task running", func(j api.Job) bool {
		for i := range 6 {
			if tj, err := sub.Job(ctx, market.TaskID(id, i)); err == nil && tj.State == api.JobRunning && tj.Provider != "" {
				victim = nodeIndex(t, c, tj.Provider)
				return true
			}
		}
		return false
	})
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Restart(context.Background(), victim) })
	j := waitJob(t, sub, id, 3*time.Minute, "the array's end", func(j api.Job) bool { return j.State.Terminal() })
	if j.Tasks == nil || j.Tasks.Completed != 6 {
		t.Fatalf("the array ended with %+v, want 6 tasks completed", j.Tasks)
	}
	lost := 0
	for i := range 6 {
		tj, err := sub.Job(ctx, market.TaskID(id, i))
		if err != nil {
			t.Fatal(err)
		}
		if len(tj.Attempts) > 1 && tj.Attempts[0].Outcome == "provider-lost" {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("no task was lost with the killed provider and run again")
	}
	dir := filepath.Join(t.TempDir(), "lossy")
	if got, code := runE31(t, ctx, c.Nodes[0].API, "get", id, "-o", dir); code != 0 {
		t.Fatalf("e31 get: exit %d\n%s", code, got)
	}
	for i := range 6 {
		if b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "i")); err != nil || string(b) != strconv.Itoa(i)+"\n" {
			t.Fatalf("task %d wrote %q, %v", i, b, err)
		}
	}
	t.Logf("%d tasks lost with the killed provider ran again", lost)
}

// An array whose task fails: e31 wait says so and exits non-zero, status
// names the failed task, and e31 resume ARRAY runs only that task again,
// from its checkpoint, after which the array completes.
func TestArrayResumeFailedTasks(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 2, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}
	got, code := e31("submit", "--name", "flaky", "--array", "4", "--gpus", "1", "--limit", "1m",
		"--checkpoint-path", "/ckpt", "--checkpoint-every", "1m", "--",
		"sh", "-c", `if [ "$E31_TASK_INDEX" != 2 ] || [ -f /ckpt/tried ]; then echo ok > /out/r; else touch /ckpt/tried; exit 3; fi`)
	if code != 0 {
		t.Fatalf("e31 submit: exit %d\n%s", code, got)
	}
	id := arrayNamed(t, ctx, sub, "flaky")
	if got, code := e31("wait", id); code == 0 || !strings.Contains(got, "failed") {
		t.Fatalf("e31 wait of an array with a failed task: exit %d\n%s", code, got)
	}
	status, _ := e31("status", id)
	if !strings.Contains(status, "4 tasks: 3 completed, 1 failed") || !regexp.MustCompile(`failed tasks\s+2\n`).MatchString(status) {
		t.Fatalf("e31 status of the array:\n%s", status)
	}
	if got, code := e31("resume", id); code != 0 {
		t.Fatalf("e31 resume ARRAY: exit %d\n%s", code, got)
	}
	if got, code := e31("wait", id); code != 0 {
		t.Fatalf("e31 wait after resume: exit %d\n%s", code, got)
	}
	j, err := sub.Job(ctx, id)
	if err != nil || j.Tasks.Completed != 4 {
		t.Fatalf("after resume: %+v, %v", j.Tasks, err)
	}
	for i := range 4 {
		tj, err := sub.Job(ctx, market.TaskID(id, i))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 1}[i == 2]; max(len(tj.Attempts), 1) != want {
			t.Fatalf("task %d ran %d times, want %d", i, len(tj.Attempts), want)
		}
	}
	if _, code := e31("resume", id); code == 0 {
		t.Fatal("e31 resume of an array with no failed task succeeded")
	}
}

// An array after an upstream: held on its node until the upstream
// completes, each task reading the upstream's output, and followed,
// collected and counted under the ID it was given at submit.
func TestArrayAfterUpstream(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 1, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}
	got, code := e31("submit", "--name", "prep", "--gpus", "0", "--limit", "1m", "--", "sh", "-c", "sleep 1; echo 5 > /out/n")
	if code != 0 {
		t.Fatalf("e31 submit prep: exit %d\n%s", code, got)
	}
	prep := strings.TrimSpace(strings.SplitN(got, "\n", 2)[0])
	got, code = e31("submit", "--name", "fan", "--after", prep, "--input", "job:"+prep+"/out:/in", "--array", "3", "--gpus", "0", "--limit", "1m", "--",
		"sh", "-c", `echo $(( $(cat /in/n) + E31_TASK_INDEX )) > /out/v`)
	if code != 0 {
		t.Fatalf("e31 submit of an array after prep: exit %d\n%s", code, got)
	}
	handle := strings.TrimSpace(strings.SplitN(got, "\n", 2)[0])
	if got, code := e31("wait", handle); code != 0 || !strings.Contains(got, "completed") {
		st, _ := e31("status", "--json", handle)
		t.Fatalf("e31 wait of the held array: exit %d\n%s\n%.3000s", code, got, st)
	}
	j, err := sub.Job(ctx, handle)
	if err != nil || j.ID != handle || j.Tasks == nil || j.Tasks.Completed != 3 || j.Tasks.ID == handle {
		t.Fatalf("the held array under its handle %s: %+v, %v", handle, j, err)
	}
	dir := filepath.Join(t.TempDir(), "fan")
	if got, code := e31("get", handle, "-o", dir); code != 0 {
		t.Fatalf("e31 get of the held array: exit %d\n%s", code, got)
	}
	for i := range 3 {
		if b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "v")); err != nil || string(b) != strconv.Itoa(5+i)+"\n" {
			t.Fatalf("task %d wrote %q, %v", i, b, err)
		}
	}
	list, _ := e31("list", "--name", "fan")
	if strings.Count(list, "fan") != 1 || !strings.Contains(list, handle) {
		t.Fatalf("e31 list shows the held array as:\n%s", list)
	}
}

// A pipeline file of three stages, prepare -> an array of 100 tasks ->
// reduce, whose reduce reads the array's outputs as one folder of
// <index>/ folders: submitted, the CLI exits; the submitter's daemon,
// restarted in the middle, runs the pipeline to its end.
func TestPipelineThroughAnArray(t *testing.T) {
	c := start(t, cluster.Options{N: 3, GPUs: 1, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pipeline := `name: sweep
jobs:
  - name: prepare
    work: {command: [sh, -c, "echo 100 > /out/base"]}
    request: {gpus: 0, cpus: 1, limit: 1m}
    output: {path: /out}
  - name: runs
    after: [prepare]
    array: {count: 100, parallel: 10}
    work: {command: [sh, -c, "sleep 0.2; echo $(( $(cat /in/base) + E31_TASK_INDEX )) > /out/v"]}
    data: [{source: "job:prepare/out", mount: /in}]
    request: {gpus: 1, limit: 1m}
    output: {path: /out}
  - name: reduce
    after: [runs]
    work: {command: [sh, -c, "ls /in | wc -l > /out/n; cat /in/*/v | awk '{s+=$1} END {print s}' > /out/sum"]}
    data: [{source: "job:runs/out", mount: /in}]
    request: {gpus: 0, cpus: 1, limit: 1m}
    output: {path: /out}
`
	file := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(file, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, code := runE31(t, ctx, api0, "submit", file); code != 0 {
		t.Fatalf("e31 submit of the pipeline: exit %d\n%s", code, got)
	}
	runs := ""
	all, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all {
		if j.Name == "runs" {
			runs = j.ID // held for prepare: an array once released
		}
	}
	waitJob(t, sub, runs, 2*time.Minute, "some tasks done", func(j api.Job) bool { return j.Tasks != nil && j.Tasks.Completed >= 10 })
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	sub = c.Client(0)
	var reduce string
	waitJob(t, sub, runs, 3*time.Minute, "the array's end", func(j api.Job) bool { return j.State.Terminal() })
	jobs, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name == "reduce" {
			reduce = j.ID
		}
	}
	if reduce == "" {
		t.Fatal("the reduce job is not listed")
	}
	j := waitJob(t, sub, reduce, 2*time.Minute, "reduce's end", func(j api.Job) bool { return j.State.Terminal() })
	if j.Outcome != "completed" {
		t.Fatalf("reduce ended %s: %s", j.Outcome, j.Reason)
	}
	dir := filepath.Join(t.TempDir(), "reduce")
	if _, err := sub.Get(ctx, reduce, api.GetRequest{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	n, _ := os.ReadFile(filepath.Join(dir, "out", "n"))
	sum, _ := os.ReadFile(filepath.Join(dir, "out", "sum"))
	// 100 folders; the values 100..199 sum to 14950.
	if strings.TrimSpace(string(n)) != "100" || strings.TrimSpace(string(sum)) != "14950" {
		t.Fatalf("reduce saw %q folders summing to %q, want 100 and 14950", n, sum)
	}
}
