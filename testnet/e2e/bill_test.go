package e2e

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// billPipeline is a pipeline file whose second stage is an array: held
// for prepare, then announced under an ID of its own that no command
// shows.
const billPipeline = `name: bill
jobs:
  - name: prepare
    work: {command: [sh, -c, "echo ready > /out/r"]}
    request: {gpus: 1, limit: 1m}
    output: {path: /out}
  - name: sweep
    after: [prepare]
    work: {command: [sh, -c, "sleep 4; test $E31_TASK_INDEX -ne 4 && echo $E31_TASK_INDEX > /out/i"]}
    request: {gpus: 1, limit: 1m, retries: 1}
    output: {path: /out}
    array: {count: 6}
`

// billFixed is the sweep's work with its bug fixed, for resume --with.
const billFixed = `name: sweep
work: {command: [sh, -c, "sleep 1; echo $E31_TASK_INDEX > /out/i"]}
request: {gpus: 1, limit: 1m}
output: {path: /out}
array: {count: 6}
`

// One bill, one ID: a pipeline's array stage runs on three nodes, the
// submitter's own among them, and a provider is killed mid-array so that
// the tasks it held go on under new IDs; task 4 fails by its own bug, is
// retried (request.retries) and fails again, and e31 resume --failed
// --with runs it with the bug fixed. Under the ID the user was shown,
// status, usage --job, usage --job --tasks, receipts --job, the export
// that verify checks and the dashboard all give the same held and owed
// figures, over every task and attempt, before the resume and after it;
// status ID.N names a task of the held array.
func TestBillOneIDOneSum(t *testing.T) {
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"1xH100:80GiB", "1xH100:80GiB", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "3s", "--grace", "1s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	dir := t.TempDir()
	file := filepath.Join(dir, "bill.yaml")
	if err := os.WriteFile(file, []byte(billPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, code := runE31(t, ctx, api0, "submit", file); code != 0 {
		t.Fatalf("e31 submit %s: exit %d\n%s", file, code, got)
	}
	id := jobNamed(t, ctx, sub, "sweep")

	// A task leased to another node than the submitter's: kill it there.
	var array string
	var victim int
	waitJob(t, sub, id, 2*time.Minute, "a task of the sweep to run on another node", func(j api.Job) bool {
		if j.Tasks == nil {
			return false
		}
		array = j.Tasks.ID
		for i := range j.Tasks.Total {
			tj, err := sub.Job(ctx, market.TaskID(array, i))
			if err != nil || tj.State != api.JobRunning {
				continue
			}
			for n := 1; n < len(c.Nodes); n++ {
				if tj.Provider == c.Nodes[n].PeerID {
					victim = n
					return true
				}
			}
		}
		return false
	})
	if array == id {
		t.Fatalf("the sweep's array is announced under the held job's ID %s", id)
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	end := waitJob(t, sub, id, 3*time.Minute, "the sweep to end", func(j api.Job) bool { return j.State.Terminal() })
	if end.Tasks == nil || end.Tasks.Completed != 5 || end.Tasks.Failed != 1 {
		t.Fatalf("the sweep ended %s with tasks %+v, want 5 completed and task 4 failed", end.Outcome, end.Tasks)
	}

	f := billOf(t, ctx, api0, id, dir)
	if f.moreAttempts < 2 {
		t.Fatalf("want task 4 retried and a task gone on under a new ID after node %d was killed:\n%s", victim, f.tasksText)
	}
	dashboardBill(t, ctx, c.Nodes[0], id, f)

	// Task 4 again, with the bug fixed: its third attempt.
	fixed := filepath.Join(dir, "fixed.yaml")
	if err := os.WriteFile(fixed, []byte(billFixed), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "resumed-out") // --wait writes the array's outputs
	if got, code := runE31(t, ctx, api0, "resume", id, "--failed", "--with", fixed, "--wait", "-o", outDir); code != 0 {
		t.Fatalf("e31 resume %s --failed --with %s --wait -o %s: exit %d\n%s", id, fixed, outDir, code, got)
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "4", "out", "i")); err != nil || strings.TrimSpace(string(b)) != "4" {
		t.Errorf("resume --wait -o wrote task 4's output as %q (%v), want 4", b, err)
	}
	again := billOf(t, ctx, api0, id, dir)
	if again.held <= f.held || again.leases <= f.leases {
		t.Errorf("after the resume: held %.6f GPU-h in %d leases, before %.6f in %d", again.held, again.leases, f.held, f.leases)
	}
	var ju api.JobUsage
	if out, code := runE31(t, ctx, api0, "usage", "--job", id, "--tasks", "--json"); code != 0 || json.Unmarshal([]byte(out), &ju) != nil {
		t.Fatalf("e31 usage --job %s --tasks --json: exit %d\n%s", id, code, out)
	}
	for _, task := range ju.Tasks {
		if task.Index == 4 && task.Attempts < 3 {
			t.Errorf("task 4 counts %d attempts, want its first, its retry and its resumption:\n%s", task.Attempts, again.tasksText)
		}
	}
	dashboardBill(t, ctx, c.Nodes[0], id, again)
	// ID.N of the held array is its task N.
	for i := range 6 {
		task := regexp.MustCompile(`(?m)^job\s+` + regexp.QuoteMeta(market.TaskID(array, i)) + ` `)
		if got, code := runE31(t, ctx, api0, "status", market.TaskID(id, i)); code != 0 || !task.MatchString(got) {
			t.Fatalf("e31 status %s: exit %d\n%s", market.TaskID(id, i), code, got)
		}
	}
}

// jobNamed is the ID of the job of this node named name, as list shows it.
func jobNamed(t *testing.T, ctx context.Context, cl *api.Client, name string) string {
	t.Helper()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name == name {
			return j.ID
		}
	}
	t.Fatalf("no job named %s among %d", name, len(jobs))
	return ""
}

// bill is what the commands say a job held and owes.
type bill struct {
	held, owed   float64 // GPU-hours, from status
	leases       int
	moreAttempts int    // tasks that took more than one attempt
	tasksText    string // usage --job --tasks, for a failure's message
}

// billOf reads a job's held and owed GPU-hours from status, usage --job,
// usage --job --tasks, receipts --job, and receipts export --job with
// verify, and fails unless they all agree: text figures, printed to the
// thousandth, within rounding of the JSON ones. It may be called again
// after a step that adds attempts (a resume).
func billOf(t *testing.T, ctx context.Context, apiAddr, id, dir string) bill {
	t.Helper()
	e31 := func(args ...string) string {
		t.Helper()
		out, code := runE31(t, ctx, apiAddr, args...)
		if code != 0 {
			t.Fatalf("e31 %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	decode := func(out string, v any, args ...string) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("e31 %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	const exact, printed = 1e-9, 0.0011
	same := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s: %.6f, status says %.6f", what, got, want)
		}
	}

	var j api.Job
	decode(e31("status", "--json", id), &j)
	if j.Held == nil || j.Held.GPUHours <= 0 {
		t.Fatalf("status %s holds nothing: %+v", id, j.Held)
	}
	b := bill{held: j.Held.GPUHours, owed: j.Held.OwedGPUHours, leases: j.Held.Leases}
	if b.owed >= b.held {
		t.Errorf("status: all %.6f GPU-h owed, though a provider was lost and the submitter ran tasks on its own GPUs", b.held)
	}
	status := e31("status", id)
	sh, so := heldLine(t, "status", status, `([0-9.]+) GPU-h, owed ([0-9.]+), not owed ([0-9.]+)`)
	same("status text held", sh, b.held, printed)
	same("status text owed", so, b.owed, printed)

	var rep ledger.UsageReport
	decode(e31("usage", "--job", id, "--json"), &rep)
	same("usage --job held", rep.Total.GPUHours, b.held, exact)
	same("usage --job owed", rep.Total.OwedGPUHours, b.owed, exact)
	if rep.Total.Leases != b.leases {
		t.Errorf("usage --job counts %d leases, status %d", rep.Total.Leases, b.leases)
	}
	uh, uo := heldLine(t, "usage --job", e31("usage", "--job", id), `held ([0-9.]+) GPU-h, owed ([0-9.]+), not owed`)
	same("usage --job text held", uh, b.held, printed)
	same("usage --job text owed", uo, b.owed, printed)

	var ju api.JobUsage
	decode(e31("usage", "--job", id, "--tasks", "--json"), &ju)
	var th, to float64
	for _, task := range ju.Tasks {
		th += task.GPUHours
		to += task.OwedGPUHours
		if task.Attempts > 1 {
			b.moreAttempts++
		}
	}
	same("usage --tasks, tasks summed, held", th, b.held, exact)
	same("usage --tasks, tasks summed, owed", to, b.owed, exact)
	same("usage --tasks total held", ju.Total.GPUHours, b.held, exact)
	same("usage --tasks total owed", ju.Total.OwedGPUHours, b.owed, exact)
	b.tasksText = e31("usage", "--job", id, "--tasks")
	if !regexp.MustCompile(`(?m)^total\s`).MatchString(b.tasksText) || strings.Count(b.tasksText, "\n") < len(ju.Tasks)+1 {
		t.Errorf("usage --tasks:\n%s", b.tasksText)
	}

	rh, ro := heldLine(t, "receipts --job", e31("receipts", "--job", id), `held ([0-9.]+) GPU-h, owed ([0-9.]+), not owed`)
	same("receipts --job held", rh, b.held, printed)
	same("receipts --job owed", ro, b.owed, printed)

	export := filepath.Join(dir, "bill-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".json")
	e31("receipts", "export", "--job", id, "-o", export)
	var v struct {
		OK      bool           `json:"ok"`
		Entries int            `json:"entries"`
		Held    ledger.HeldSum `json:"held"`
	}
	decode(e31("verify", "--json", export), &v)
	if !v.OK || v.Entries == 0 || v.Held.Leases != b.leases {
		t.Errorf("verify of the export: ok %v, %d entries, %d leases (status: %d)", v.OK, v.Entries, v.Held.Leases, b.leases)
	}
	same("verify held", v.Held.GPUHours, b.held, exact)
	same("verify owed", v.Held.OwedGPUHours, b.owed, exact)
	vh, vo := heldLine(t, "verify", e31("verify", export), `held ([0-9.]+) GPU-h, owed ([0-9.]+), not owed`)
	same("verify text held", vh, b.held, printed)
	same("verify text owed", vo, b.owed, printed)
	return b
}

// heldLine finds the held and owed figures in a command's text.
func heldLine(t *testing.T, what, out, pattern string) (held, owed float64) {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s prints no held and owed line:\n%s", what, out)
	}
	held, err1 := strconv.ParseFloat(m[1], 64)
	owed, err2 := strconv.ParseFloat(m[2], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v %v\n%s", what, err1, err2, out)
	}
	return held, owed
}

// dashboardBill checks that n's dashboard, with the job chosen, shows the
// held and owed figures status gave.
func dashboardBill(t *testing.T, ctx context.Context, n *cluster.Node, id string, b bill) {
	t.Helper()
	exe := browser(t)
	dom := string(chromiumFor(t, ctx, exe, 3*time.Second, "--dump-dom", uiLink(t, ctx, n)+"#job="+id))
	text := textOf(dom, "job-bill")
	held, owed := heldLine(t, "the dashboard", text, `held ([0-9.]+) GPU-h, owed ([0-9.]+), not owed`)
	if math.Abs(held-b.held) > 0.0011 || math.Abs(owed-b.owed) > 0.0011 {
		t.Errorf("the dashboard says %q; status says held %.6f, owed %.6f", text, b.held, b.owed)
	}
}
