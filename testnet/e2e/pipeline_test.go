package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
)

// A three-stage pipeline on real daemons, submitted at once from the
// flags form and left to the submitter's daemon: prepare, then train
// --after prepare reading its output as job:PREPARE/out, then report
// --after-any train. The CLI is gone after each submit and the submitter's
// daemon is killed and restarted while prepare runs; the pipeline
// completes, each stage seeing the last one's output. A stage after a
// failed upstream ends failed naming it, having held nothing. The same
// pipeline as a file is submitted whole, followed with e31 wait --label
// and fetched with e31 get --label; a cyclic one is refused whole.
func TestPipelineAfterUpstreams(t *testing.T) {
	c := faultNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	submit := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin.E31, append([]string{"--api", c.Nodes[0].API, "submit", "--gpus", "1", "--limit", "1m"}, args...)...).Output()
		if err != nil {
			t.Fatalf("e31 submit %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	prepare := submit("--name", "prepare", "--", "sh", "-c", "sleep 2; echo 21 > /out/n")
	train := submit("--name", "train", "--after", prepare, "--input", "job:"+prepare+"/out:/in", "--",
		"sh", "-c", "echo $(( $(cat /in/n) * 2 )) > /out/model")
	report := submit("--name", "report", "--after-any", train, "--input", "job:"+train+"/out:/in", "--",
		"sh", "-c", "echo model $(cat /in/model) > /out/report")
	doomed := submit("--name", "doomed", "--", "sh", "-c", "exit 5")
	orphan := submit("--name", "orphan", "--after", doomed, "--", "true")

	sub := c.Client(0)
	j, err := sub.Job(ctx, train)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.JobQueued || !strings.Contains(j.Reason, "held until its upstreams end: "+prepare) || len(j.Attempts) != 0 {
		t.Fatalf("train, held for prepare: %s %q, %d attempts", j.State, j.Reason, len(j.Attempts))
	}
	waitJob(t, sub, prepare, 60*time.Second, "prepare to run", func(j api.Job) bool { return j.State == api.JobRunning || j.State.Terminal() })
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	sub = c.Client(0)

	r := waitJob(t, sub, report, 2*time.Minute, "the pipeline's end", func(j api.Job) bool { return j.State.Terminal() })
	if r.Outcome != string(ledger.OutcomeCompleted) || len(r.Attempts) != 1 {
		t.Fatalf("report ended %s (%s) after %d attempts", r.Outcome, r.Reason, len(r.Attempts))
	}
	out := filepath.Join(t.TempDir(), "report")
	if got, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "get", report, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("e31 get %s: %v\n%s", report, err, got)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "report")); err != nil || string(b) != "model 42\n" {
		t.Fatalf("the report: %q, %v", b, err)
	}
	tr, err := sub.Job(ctx, train)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Outcome != string(ledger.OutcomeCompleted) || len(tr.Attempts) != 1 || tr.Attempts[0].ID == train {
		t.Fatalf("train: %s with attempts %+v", tr.Outcome, tr.Attempts)
	}
	// Receipts of the job under the ID its user has: its attempt's.
	if rs := receipts(t, sub, train); len(rs) == 0 {
		t.Fatal("no receipts under the held job's ID")
	}

	o := waitJob(t, sub, orphan, 60*time.Second, "the stage after a failed one to end", func(j api.Job) bool { return j.State.Terminal() })
	if o.Outcome != string(ledger.OutcomeFailed) || !strings.Contains(o.Reason, "upstream "+doomed+" ended failed") || len(o.Attempts) != 0 {
		t.Fatalf("after a failed upstream: %s (%s), %d attempts", o.Outcome, o.Reason, len(o.Attempts))
	}
	if rs := receipts(t, sub, orphan); len(rs) != 0 {
		t.Fatalf("a stage that never ran has %d receipts", len(rs))
	}

	// The same as a pipeline file: names for IDs, a local input beside
	// the file, followed and fetched as one by its label.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "factor"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "nightly.yaml")
	if err := os.WriteFile(file, []byte(nightlyPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "submit", file).CombinedOutput()
	if err != nil || !strings.Contains(string(got), "submitted pipeline \"nightly\", 3 jobs") {
		t.Fatalf("e31 submit %s: %v\n%s", file, err, got)
	}
	if got, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "wait", "--label", "pipeline=nightly").CombinedOutput(); err != nil {
		t.Fatalf("e31 wait --label pipeline=nightly: %v\n%s", err, got)
	}
	outs := filepath.Join(t.TempDir(), "outs")
	if got, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "get", "--label", "pipeline=nightly", "-o", outs).CombinedOutput(); err != nil {
		t.Fatalf("e31 get --label pipeline=nightly: %v\n%s", err, got)
	}
	reports, _ := filepath.Glob(filepath.Join(outs, "*", "out", "report"))
	if len(reports) != 1 {
		t.Fatalf("%d reports among the pipeline's outputs", len(reports))
	}
	if b, _ := os.ReadFile(reports[0]); string(b) != "model 63\n" {
		t.Fatalf("the pipeline file's report: %q", b)
	}

	// A file whose jobs wait for each other is refused whole.
	cyclic := strings.Replace(nightlyPipeline, "after: [prepare]", "after: [prepare, report]", 1)
	if err := os.WriteFile(file, []byte(cyclic), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := exec.CommandContext(ctx, bin.E31, "--api", c.Nodes[0].API, "submit", file).CombinedOutput(); err == nil || !strings.Contains(string(got), "cycle") {
		t.Fatalf("a cyclic pipeline: %v\n%s", err, got)
	}
	if after, _ := sub.Jobs(ctx); len(after) != len(before) {
		t.Fatalf("a refused pipeline submitted %d jobs", len(after)-len(before))
	}
}

// nightlyPipeline is a pipeline file: prepare reads a file beside it,
// train reads prepare's output, report train's.
const nightlyPipeline = `name: nightly
jobs:
  - name: prepare
    work: {command: [sh, -c, "echo $(( $(cat /in/factor) * 7 )) > /out/n"]}
    data: [{source: ./factor, mount: /in/factor}]
    request: {gpus: 1, limit: 1m}
    output: {path: /out}
  - name: train
    after: [prepare]
    work: {command: [sh, -c, "echo $(( $(cat /in/n) * 3 )) > /out/model"]}
    data: [{source: "job:prepare/out", mount: /in}]
    request: {gpus: 1, limit: 1m}
    output: {path: /out}
  - name: report
    after: [train]
    work: {command: [sh, -c, "echo model $(cat /in/model) > /out/report"]}
    data: [{source: "job:train/out", mount: /in}]
    request: {gpus: 1, limit: 1m}
    output: {path: /out}
`
