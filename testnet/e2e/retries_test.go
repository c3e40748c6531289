package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/testnet/cluster"
)

// request.retries on real daemons, from the flags form: a job that fails
// on its first run and keeps a mark in its checkpoint folder is run again
// from that checkpoint and completes as its second attempt, under its own
// ID, with e31 submit --wait exiting 0; a job that always fails runs 1 +
// retries times and then ends failed, e31 wait exiting non-zero.
func TestRetriesRunAFailedJobAgain(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 1, Args: []string{"--epoch", "250ms", "--receipt-interval", "1s"}})
	api0 := c.Nodes[0].API
	sub := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}

	// Fails once, leaving a mark in its checkpoint folder (taken at the
	// run's end); run again from it, it finds the mark and completes.
	out := filepath.Join(t.TempDir(), "out")
	got, code := e31("submit", "--wait", "-o", out, "--name", "flaky", "--gpus", "1", "--limit", "1m", "--retries", "2",
		"--checkpoint-path", "/ckpt", "--checkpoint-every", "1m", "--",
		"sh", "-c", `if [ -f /ckpt/tried ]; then echo second > /out/run; else touch /ckpt/tried; echo first failing >&2; exit 3; fi`)
	if code != 0 || !strings.Contains(got, "completed") || !strings.Contains(got, "2 attempts") {
		t.Fatalf("e31 submit --wait --retries 2 of a job that fails once: exit %d\n%s", code, got)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "run")); err != nil || string(b) != "second\n" {
		t.Fatalf("the retry's output: %q, %v", b, err)
	}
	jobs, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var flaky string
	for _, j := range jobs {
		if j.Name == "flaky" {
			flaky = j.ID
			if len(j.Attempts) != 2 || j.Attempts[0].Outcome != string(ledger.OutcomeFailed) || j.Attempts[1].StartedFrom == "" {
				t.Fatalf("job %s: attempts %+v, want a failed first and a second from its checkpoint", j.ID, j.Attempts)
			}
		}
	}
	if flaky == "" {
		t.Fatal("the job is not listed under its name")
	}

	// Always fails: three attempts, then failed for good.
	id, code := e31("submit", "--name", "doomed", "--gpus", "1", "--limit", "1m", "--retries", "2", "--", "sh", "-c", "exit 4")
	if code != 0 {
		t.Fatalf("e31 submit: exit %d\n%s", code, id)
	}
	id = strings.TrimSpace(strings.SplitN(id, "\n", 2)[0])
	if got, code := e31("wait", id); code == 0 || !strings.Contains(got, "failed") {
		t.Fatalf("e31 wait of a job that always fails: exit %d\n%s", code, got)
	}
	j, err := sub.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Outcome != string(ledger.OutcomeFailed) || len(j.Attempts) != 3 {
		t.Fatalf("job %s ended %s after %d attempts, want failed after 3", id, j.Outcome, len(j.Attempts))
	}
	status, code := e31("status", id)
	if code != 0 || strings.Count(status, "failed (job: exit status 4)") != 3 {
		t.Fatalf("e31 status %s does not list the three failed attempts: exit %d\n%s", id, code, status)
	}
}
