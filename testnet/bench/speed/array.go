package speed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the array figures (issue 35).
const (
	goalArraySubmit   = 2 * time.Second
	goalArrayMessages = 0.5
	goalArrayRate     = 2.0
	arrayGPUs         = 4
	arrayWaitTime     = 3 * time.Hour
)

// ArrayOptions size the array run.
type ArrayOptions struct {
	// Nodes is the network's size (4 GPUs each); Tasks the array's;
	// Singles how many single jobs make the baseline (0: as many).
	Nodes, Tasks, Singles int
}

// ArrayReport is the array run's figures: the same trivial work as one
// array and as single jobs, on one network, one after the other.
type ArrayReport struct {
	Nodes   int `json:"nodes"`
	Tasks   int `json:"tasks"`
	Singles int `json:"singles"`
	// SubmitS is the CLI's time to submit the array; SinglesSubmitS the
	// time to submit the singles back to back through the API (a CLI
	// each would add a process start to each).
	SubmitS        float64 `json:"submit_s"`
	SinglesSubmitS float64 `json:"singles_submit_s"`
	// Messages and bytes are what the jobs topic delivered to a node
	// that submitted nothing, per task or job.
	MessagesPerTask    float64 `json:"messages_per_task"`
	SinglesMessagesPer float64 `json:"singles_messages_per_job"`
	BytesPerTask       float64 `json:"bytes_per_task"`
	SinglesBytesPer    float64 `json:"singles_bytes_per_job"`
	TasksPerS          float64 `json:"tasks_per_s"`
	SinglesPerS        float64 `json:"singles_per_s"`
	// SubmitterMiB is the submitter daemon's resident memory once the
	// array had ended, and once the singles had.
	SubmitterMiB        float64 `json:"submitter_mib"`
	SinglesSubmitterMiB float64 `json:"singles_submitter_mib"`
	Completed           int     `json:"completed"`
	// Indices is how many tasks' outputs e31 get wrote, each its own index
	// (checked); GetS how long it took.
	Indices int     `json:"indices"`
	GetS    float64 `json:"get_s"`
}

// MeasureArray starts o.Nodes nodes with 4 GPUs each; node 0 submits
// o.Tasks trivial tasks as one array with e31 submit, and the run waits for
// the array's end; then it submits o.Singles trivial jobs one by one and
// waits for theirs. The last node, which submits nothing, counts what the
// jobs topic delivered it in each part.
func MeasureArray(ctx context.Context, e bench.Env, o ArrayOptions) (ArrayReport, error) {
	if o.Singles <= 0 {
		o.Singles = o.Tasks
	}
	r := ArrayReport{Nodes: o.Nodes, Tasks: o.Tasks, Singles: o.Singles}
	e.Logf("array: %d nodes x %d GPUs; %d trivial tasks as one array, then %d single jobs", o.Nodes, arrayGPUs, o.Tasks, o.Singles)
	c, err := bench.StartNetwork(ctx, cluster.Options{N: o.Nodes, GPUs: arrayGPUs, Dir: filepath.Join(e.Dir, "array"), Bin: e.Bin,
		Heartbeat: node.DefaultHeartbeat, Metrics: true})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	sub, observer := c.Nodes[0], c.Nodes[len(c.Nodes)-1]
	cl := c.Client(0)

	// Each task writes its own index, each single job a constant: the
	// same work, and the array's output shows each task ran once.
	d := market.NewDeclaration("array-bench", []string{"sh", "-c", `echo "$E31_TASK_INDEX" > /out/i`}, 1, market.Duration(60_000), nil)
	decl, err := json.Marshal(market.NewDeclaration("bench", []string{"sh", "-c", "echo 0 > /out/i"}, 1, market.Duration(60_000), nil))
	if err != nil {
		return r, err
	}
	d.Array = &market.Array{Count: o.Tasks}
	file := filepath.Join(e.Dir, "array.json")
	b, err := json.Marshal(d)
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return r, err
	}

	before, err := jobsTopic(ctx, observer)
	if err != nil {
		return r, err
	}
	start := time.Now()
	out, err := osexec.CommandContext(ctx, e.Bin.E31, "--api", sub.API, "--api-token-file", sub.TokenFile, "submit", file).CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("e31 submit of the array: %w\n%s", err, out)
	}
	r.SubmitS = time.Since(start).Seconds()
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	e.Logf("array: e31 submit took %.2fs; waiting for %d tasks", r.SubmitS, o.Tasks)
	j, err := followArray(ctx, e, cl, id)
	if err != nil {
		return r, fmt.Errorf("array %s: %w", id, err)
	}
	took := time.Since(start)
	if j.Tasks == nil || j.Tasks.Completed != o.Tasks {
		return r, fmt.Errorf("array %s ended with %+v, want %d tasks completed", id, j.Tasks, o.Tasks)
	}
	r.Completed = j.Tasks.Completed
	r.TasksPerS = float64(o.Tasks) / took.Seconds()
	after, err := jobsTopic(ctx, observer)
	if err != nil {
		return r, err
	}
	r.MessagesPerTask = (after.messages - before.messages) / float64(o.Tasks)
	r.BytesPerTask = (after.bytes - before.bytes) / float64(o.Tasks)
	if r.SubmitterMiB, err = rssMiB(sub.PID); err != nil {
		return r, err
	}
	e.Logf("array: %.1f tasks/s, %.2f jobs-topic messages and %.0f bytes a task, submitter %.0f MiB", r.TasksPerS, r.MessagesPerTask, r.BytesPerTask, r.SubmitterMiB)
	if r.Indices, r.GetS, err = checkIndices(ctx, e, sub, id, o.Tasks); err != nil {
		return r, err
	}
	e.Logf("array: e31 get wrote the %d indices, each once, in %.1fs", r.Indices, r.GetS)

	before = after
	w := bench.NewJobWaiter(cl)
	start = time.Now()
	for range o.Singles {
		id, err := bench.Submit(ctx, cl, decl)
		if err != nil {
			return r, err
		}
		w.Add(id)
	}
	r.SinglesSubmitS = time.Since(start).Seconds()
	e.Logf("array: %d singles submitted in %.1fs; waiting for them", o.Singles, r.SinglesSubmitS)
	es, err := bench.WaitAll(ctx, []*bench.JobWaiter{w}, time.Second, arrayWaitTime)
	if err != nil {
		return r, err
	}
	for _, j := range es {
		if err := j.Completed(); err != nil {
			return r, err
		}
	}
	r.SinglesPerS = float64(o.Singles) / time.Since(start).Seconds()
	after, err = jobsTopic(ctx, observer)
	if err != nil {
		return r, err
	}
	r.SinglesMessagesPer = (after.messages - before.messages) / float64(o.Singles)
	r.SinglesBytesPer = (after.bytes - before.bytes) / float64(o.Singles)
	if r.SinglesSubmitterMiB, err = rssMiB(sub.PID); err != nil {
		return r, err
	}
	e.Logf("array: singles %.1f jobs/s, %.2f jobs-topic messages and %.0f bytes a job", r.SinglesPerS, r.SinglesMessagesPer, r.SinglesBytesPer)
	return r, nil
}

// followArray follows an array to its end as e31 status --follow does:
// asking again once it has changed (api.Client.NextJob), at most once a
// second, as a display refreshes, rather than polling the submitter with
// the whole array's summary (held time included) many times a second.
func followArray(ctx context.Context, e bench.Env, cl *api.Client, id string) (api.Job, error) {
	lctx, cancel := context.WithTimeout(ctx, arrayWaitTime)
	defer cancel()
	j, err := cl.Job(lctx, id)
	logged := time.Now()
	for err == nil && !j.State.Terminal() {
		if err := task.Sleep(lctx, time.Second); err != nil {
			return j, err
		}
		if j, err = cl.NextJob(lctx, j, 30*time.Second, time.Second); err != nil {
			break
		}
		if j.Tasks != nil && time.Since(logged) > time.Minute {
			logged = time.Now()
			e.Logf("array: %d completed, %d running, %d queued, %d failed", j.Tasks.Completed, j.Tasks.Running, j.Tasks.Queued, j.Tasks.Failed)
		}
	}
	if err != nil {
		return j, err
	}
	// The ended array, with what its tasks held.
	return cl.Job(lctx, id)
}

// checkIndices gets the array's output with e31 get and checks that task
// i wrote i, for every task: each index exactly once.
func checkIndices(ctx context.Context, e bench.Env, sub *cluster.Node, id string, n int) (int, float64, error) {
	dir := filepath.Join(e.Dir, "array-out")
	start := time.Now()
	out, err := osexec.CommandContext(ctx, e.Bin.E31, "--api", sub.API, "--api-token-file", sub.TokenFile, "get", id, "-o", dir).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("e31 get of the array: %w\n%s", err, out)
	}
	took := time.Since(start).Seconds()
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i), "out", "i"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(i) {
			return i, took, fmt.Errorf("task %d wrote %q, want its index: %v", i, b, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return n, took, err
	}
	return n, took, nil
}

// topicCount is what the jobs topic delivered a node so far.
type topicCount struct{ messages, bytes float64 }

func jobsTopic(ctx context.Context, n *cluster.Node) (topicCount, error) {
	m, err := bench.Scrape(ctx, n.Metrics)
	if err != nil {
		return topicCount{}, fmt.Errorf("scrape %s: %w", n.Name, err)
	}
	return topicCount{
		messages: m[`e31_gossip_messages_total{kind="delivered",topic="jobs"}`],
		bytes:    m[`e31_gossip_bytes_total{direction="in",topic="jobs"}`],
	}, nil
}

func rssMiB(pid int) (float64, error) {
	kib, err := bench.VmRSS(pid)
	return float64(kib) / 1024, err
}

// Figures are the array rows, each against the singles of the same run.
func (r ArrayReport) Figures() []bench.Figure {
	name := fmt.Sprintf("%d trivial tasks as one array, %d nodes x %d GPUs", r.Tasks, r.Nodes, arrayGPUs)
	singles := fmt.Sprintf("%d single jobs", r.Singles)
	return []bench.Figure{
		{Group: "array", Name: name + ": e31 submit", Value: r.SubmitS, Unit: "s", Measured: fmt.Sprintf("%.2f s", r.SubmitS),
			Baseline: fmt.Sprintf("%s submitted back to back in %.1f s", singles, r.SinglesSubmitS),
			Goal:     "<= " + goalArraySubmit.String(), OK: new(r.SubmitS <= goalArraySubmit.Seconds())},
		{Group: "array", Name: "  jobs-topic messages a task", Value: r.MessagesPerTask, Unit: "msgs", Measured: fmt.Sprintf("%.2f", r.MessagesPerTask),
			Baseline: fmt.Sprintf("%.2f a single job", r.SinglesMessagesPer), Ratio: ratioOf(r.MessagesPerTask, r.SinglesMessagesPer),
			Goal: fmt.Sprintf("<= %.1f", goalArrayMessages), OK: new(r.MessagesPerTask <= goalArrayMessages)},
		{Group: "array", Name: "  jobs-topic bytes a task", Value: r.BytesPerTask, Unit: "B", Measured: fmt.Sprintf("%.0f B", r.BytesPerTask),
			Baseline: fmt.Sprintf("%.0f B a single job", r.SinglesBytesPer), Ratio: ratioOf(r.BytesPerTask, r.SinglesBytesPer)},
		{Group: "array", Name: "  throughput", Value: r.TasksPerS, Unit: "tasks/s", Measured: fmt.Sprintf("%.1f tasks/s", r.TasksPerS),
			Baseline: fmt.Sprintf("%.1f single jobs/s", r.SinglesPerS), Ratio: ratioOf(r.TasksPerS, r.SinglesPerS),
			Goal: fmt.Sprintf(">= %.0fx the singles", goalArrayRate), OK: new(r.SinglesPerS > 0 && r.TasksPerS >= goalArrayRate*r.SinglesPerS)},
		{Group: "array", Name: "  outputs with their own index, by e31 get", Value: float64(r.Indices), Unit: "tasks",
			Measured: fmt.Sprintf("%d of %d in %.1f s", r.Indices, r.Tasks, r.GetS), Goal: "each index once", OK: new(r.Indices == r.Tasks)},
		{Group: "array", Name: "  submitter's resident memory after", Value: r.SubmitterMiB, Unit: "MiB", Measured: fmt.Sprintf("%.0f MiB", r.SubmitterMiB),
			Baseline: fmt.Sprintf("%.0f MiB after the singles too", r.SinglesSubmitterMiB)},
	}
}

func ratioOf(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	return new(a / b)
}
