package e2e

import (
	"context"
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

// Steering a sweep on real daemons: --array 3,7,40%2 runs exactly those
// indices, each under its own ID and index, and e31 get writes them
// under those indices; a literal $VAR in a command with no shell is
// warned of at submit; an array with --max-failures 2 whose tasks all
// fail stops at its second failure (the tasks then being leased or
// running end as they will), the rest withdrawn, never leased and owing
// nothing, and ends failed saying why, with no empty attribution.
func TestSteerASweep(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 2, Args: []string{"--epoch", "250ms"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}

	got, code := e31("submit", "--wait", "--name", "picked", "--array", "3,7,40%2", "--gpus", "0", "--cpus", "1", "--limit", "1m", "--",
		"sh", "-c", `echo "$E31_TASK_INDEX of $E31_TASK_COUNT" > /out/i`)
	if code != 0 || !strings.Contains(got, "completed") {
		t.Fatalf("e31 submit --wait --array 3,7,40%%2: exit %d\n%s", code, got)
	}
	id := arrayNamed(t, ctx, sub, "picked")
	arr, err := sub.Job(ctx, id)
	if err != nil || arr.Tasks == nil || arr.Tasks.Total != 3 || arr.Tasks.Completed != 3 || !slices.Equal(arr.Tasks.Indices, []int{3, 7, 40}) {
		t.Fatalf("the array of 3,7,40: %+v, %v", arr.Tasks, err)
	}
	for _, i := range []int{0, 1, 41} {
		if _, err := sub.Job(ctx, market.TaskID(id, i)); err == nil {
			t.Fatalf("task %d of an array of 3,7,40 exists", i)
		}
	}
	dir := filepath.Join(t.TempDir(), "picked")
	if got, code := e31("get", id, "-o", dir); code != 0 || !strings.Contains(got, "wrote 3 of 3 tasks") {
		t.Fatalf("e31 get of the array: exit %d\n%s", code, got)
	}
	for _, i := range []int{3, 7, 40} {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "i"))
		if err != nil || string(b) != strconv.Itoa(i)+" of 3\n" {
			t.Fatalf("task %d wrote %q, %v", i, b, err)
		}
	}

	// No shell expands $E31_TASK_VALUE here: said at submit, which goes on.
	got, code = e31("submit", "--name", "literal", "--values", "a,b", "--gpus", "0", "--cpus", "1", "--limit", "1m", "--", "echo", "$E31_TASK_VALUE")
	if code != 0 || !strings.Contains(got, `warning: argument 1 of the command, "$E31_TASK_VALUE", names $E31_TASK_VALUE`) ||
		!strings.Contains(got, `sh -c 'echo "$E31_TASK_VALUE"'`) {
		t.Fatalf("e31 submit of a literal $E31_TASK_VALUE: exit %d\n%s", code, got)
	}
	if got, code := e31("withdraw", arrayNamed(t, ctx, sub, "literal")); code != 0 {
		t.Fatalf("e31 withdraw: exit %d\n%s", code, got)
	}

	// Ten tasks that all fail, one at a time, stopped at the second.
	const tasks = 10
	got, code = e31("submit", "--wait", "--name", "failing", "--array", strconv.Itoa(tasks)+"%1", "--max-failures", "2",
		"--gpus", "0", "--cpus", "1", "--limit", "1m", "--", "sh", "-c", "sleep 1; exit 3")
	if code == 0 || !strings.Contains(got, "stopped at its max_failures, 2 failed tasks: ") || strings.Contains(got, "attributed to )") {
		t.Fatalf("e31 submit --wait of an array stopped at its max_failures: exit %d\n%s", code, got)
	}
	fid := arrayNamed(t, ctx, sub, "failing")
	f, err := sub.Job(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	ft := f.Tasks
	// The tasks being leased or running at the second failure run on
	// and fail too: with at most one leased at once, one or two of them.
	if f.State != api.JobReleased || f.Outcome != "failed" || !strings.HasPrefix(f.Reason, "stopped at its max_failures") || ft.Failed < 2 || ft.Failed > 4 || ft.Withdrawn != tasks-ft.Failed {
		t.Fatalf("the stopped array: %s %s %q, tasks %+v", f.State, f.Outcome, f.Reason, ft)
	}
	withdrawn := 0
	for i := range tasks {
		tj, err := sub.Job(ctx, market.TaskID(fid, i))
		if err != nil {
			t.Fatal(err)
		}
		if tj.State != api.JobWithdrawn {
			continue
		}
		withdrawn++
		if tj.Provider != "" || (tj.Held != nil && (tj.Held.HeldMs != 0 || tj.Held.GPUHours != 0 || tj.Held.CPUHours != 0)) {
			t.Fatalf("withdrawn task %d was leased or owes: provider %q, held %+v", i, tj.Provider, tj.Held)
		}
	}
	if withdrawn != ft.Withdrawn {
		t.Fatalf("%d tasks withdrawn, the array counts %d", withdrawn, ft.Withdrawn)
	}
}
