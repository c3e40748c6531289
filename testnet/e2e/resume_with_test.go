package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/cluster"
)

// A sweep steered: an array of six tasks whose command fails for indices
// 2 and 4, submitted with --wait -o DIR, which writes the six outputs
// there and exits non-zero naming the failed tasks; e31 resume ARRAY --failed --with fixed.yaml runs exactly those
// two again, with the fixed command, as the next attempts of the same
// tasks; the array then completes, e31 get writes all six outputs, and
// e31 status ARRAY.2 lists both attempts of that task.
func TestResumeFailedTasksWithNewWork(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 2, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}
	first := filepath.Join(t.TempDir(), "first")
	got, code := e31("submit", "--wait", "-o", first, "--name", "buggy", "--array", "6", "--gpus", "0", "--cpus", "1", "--limit", "1m", "--",
		"sh", "-c", `echo "buggy $E31_TASK_INDEX" > /out/r; test $E31_TASK_INDEX -ne 2 -a $E31_TASK_INDEX -ne 4`)
	// A failed task's output and logs are written too, for a look at why.
	if code == 0 || !strings.Contains(got, "wrote 6 of 6 tasks") || !strings.Contains(got, "tasks 2,4 failed") || !strings.Contains(got, "ended failed") {
		t.Fatalf("e31 submit --wait -o of an array with failed tasks: exit %d\n%s", code, got)
	}
	for i := range 6 {
		if b, err := os.ReadFile(filepath.Join(first, strconv.Itoa(i), "out", "r")); err != nil || string(b) != "buggy "+strconv.Itoa(i)+"\n" {
			t.Fatalf("submit --wait -o: task %d wrote %q, %v", i, b, err)
		}
	}
	id := arrayNamed(t, ctx, sub, "buggy")
	if status, _ := e31("status", id); !regexp.MustCompile(`failed tasks\s+2,4\n`).MatchString(status) {
		t.Fatalf("e31 status of the array:\n%s", status)
	}

	// The fix declares no array: each task keeps its index and count.
	fixed := filepath.Join(t.TempDir(), "fixed.yaml")
	decl := `name: fixed
work: {command: [sh, -c, 'echo "fixed $E31_TASK_INDEX of $E31_TASK_COUNT" > /out/r']}
request: {gpus: 0, cpus: 1, limit: 1m}
output: {path: /out}
`
	if err := os.WriteFile(fixed, []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	got, code = e31("resume", id, "--failed", "--with", fixed)
	if code != 0 || !strings.Contains(got, "tasks 2,4 of array "+id+" run again") {
		t.Fatalf("e31 resume --failed --with: exit %d\n%s", code, got)
	}
	if got, code := e31("wait", id); code != 0 {
		t.Fatalf("e31 wait after the rerun: exit %d\n%s", code, got)
	}
	j, err := sub.Job(ctx, id)
	if err != nil || j.ID != id || j.Tasks.Completed != 6 || j.Outcome != "completed" {
		t.Fatalf("after the rerun: %+v, %v", j, err)
	}
	for i := range 6 {
		tj, err := sub.Job(ctx, market.TaskID(id, i))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 1}[i == 2 || i == 4]; max(len(tj.Attempts), 1) != want {
			t.Fatalf("task %d ran %d times, want %d", i, len(tj.Attempts), want)
		}
	}

	dir := filepath.Join(t.TempDir(), "out")
	if got, code := e31("get", id, "-o", dir); code != 0 || !strings.Contains(got, "wrote 6 of 6 tasks") {
		t.Fatalf("e31 get of the array: exit %d\n%s", code, got)
	}
	for i := range 6 {
		want := "buggy " + strconv.Itoa(i) + "\n"
		if i == 2 || i == 4 {
			want = "fixed " + strconv.Itoa(i) + " of 6\n"
		}
		if b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "r")); err != nil || string(b) != want {
			t.Fatalf("task %d wrote %q (%v), want %q", i, b, err, want)
		}
	}
	status, code := e31("status", market.TaskID(id, 2))
	if code != 0 || !regexp.MustCompile(`attempt 1\s+\S+ .*failed`).MatchString(status) || !regexp.MustCompile(`attempt 2\s+\S+ .*completed`).MatchString(status) {
		t.Fatalf("e31 status of task 2 shows not both attempts: exit %d\n%s", code, status)
	}
	if strings.Contains(status, "attempt 3") {
		t.Fatalf("e31 status of task 2 shows a third attempt:\n%s", status)
	}
}
