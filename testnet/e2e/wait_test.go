package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// A batch user's day on real daemons: jobs submitted by the flags form are
// named after their script, selected by name, waited for together (the
// exit status the worst ending's), fetched together into a folder each,
// read by a later job as job:JOB/out, and a selection of queued jobs is
// withdrawn in one command.
func TestWaitListWithdraw(t *testing.T) {
	c := start(t, cluster.Options{N: 2, GPUs: 2})
	api0 := c.Nodes[0].API
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e31 := func(args ...string) (string, int) {
		t.Helper()
		return runE31(t, ctx, api0, args...)
	}
	submit := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin.E31, append([]string{"--api", api0, "submit"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("e31 submit %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}

	var ok []string
	for range 3 {
		ok = append(ok, submit("--gpus", "1", "--limit", "1m", "--", "sh", "-c", "echo done > /out/x"))
	}
	if out, code := e31(append([]string{"wait"}, ok...)...); code != 0 || strings.Count(out, "completed") != 3 {
		t.Fatalf("e31 wait over three jobs that complete: exit %d\n%s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "outs")
	if out, code := e31(append([]string{"get", "-o", dir}, ok...)...); code != 0 {
		t.Fatalf("e31 get of three jobs: exit %d\n%s", code, out)
	}
	for _, id := range ok {
		if b, err := os.ReadFile(filepath.Join(dir, id, "out", "x")); err != nil || string(b) != "done\n" {
			t.Fatalf("job %s's output in its own folder: %q, %v", id, b, err)
		}
	}
	// job:JOB/out takes an earlier job's output as an input.
	next := submit("--gpus", "1", "--limit", "1m", "--input", "job:"+ok[0]+"/out:/prev", "--", "sh", "-c", "cp /prev/x /out/y")
	if out, code := e31("wait", next); code != 0 {
		t.Fatalf("e31 wait for a job reading job:%s/out: exit %d\n%s", ok[0], code, out)
	}
	if out, code := e31("get", "-o", filepath.Join(dir, "next"), next); code != 0 {
		t.Fatalf("e31 get %s: exit %d\n%s", next, code, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "next", "out", "y")); err != nil || string(b) != "done\n" {
		t.Fatalf("the job that read job:%s/out wrote %q, %v", ok[0], b, err)
	}
	if out, code := e31("submit", "--gpus", "1", "--limit", "1m", "--input", "job:nosuchjob/out:/prev", "--", "true"); code == 0 || !strings.Contains(out, "nosuchjob") {
		t.Fatalf("a job:nosuchjob input: exit %d\n%s", code, out)
	}
	bad := submit("--gpus", "1", "--limit", "1m", "--", "false")
	if out, code := e31(append([]string{"wait", bad}, ok...)...); code != 1 || !strings.Contains(out, "failed (attributed to job)") {
		t.Fatalf("e31 wait with a job that fails: exit %d, want 1\n%s", code, out)
	}

	// Jobs no provider can take stay queued until withdrawn by name.
	script := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(script, []byte("echo ran > /out/ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	named := submit("--gpus", "1", "--limit", "1m", "--input", script+":/code/run.sh", "--", "sh", "/code/run.sh", "--fast")
	var big []string
	for i := range 3 {
		big = append(big, submit("--name", "sweep-"+string(rune('a'+i)), "--label", "sweep=big", "--gpus", "8", "--limit", "1m", "--", "true"))
	}
	j, err := c.Client(0).Job(ctx, named)
	if err != nil || j.Name != "run.sh" {
		t.Fatalf("the job of `sh /code/run.sh`: name %q (%v), want run.sh", j.Name, err)
	}
	out, code := e31("list", "--name", "sweep-*", "--state", "queued")
	for _, id := range big {
		if !strings.Contains(out, id) {
			t.Fatalf("e31 list --name sweep-* --state queued (exit %d) lacks %s:\n%s", code, id, out)
		}
	}
	if strings.Contains(out, named) || strings.Contains(out, ok[0]) {
		t.Fatalf("e31 list --name sweep-* lists other jobs:\n%s", out)
	}
	if out, code := e31("wait", "--timeout", "2s", big[0]); code != 6 {
		t.Fatalf("e31 wait --timeout on a queued job: exit %d, want 6\n%s", code, out)
	}
	if out, code := e31("list", "--label", "sweep=big"); code != 0 || strings.Count(out, "sweep-") != 3 {
		t.Fatalf("e31 list --label sweep=big: exit %d\n%s", code, out)
	}
	if out, code := e31("withdraw", "--name", "sweep-*", "--label", "sweep=big", "--state", "queued"); code != 0 || strings.Count(out, "withdrawn") != 3 {
		t.Fatalf("e31 withdraw --name sweep-* --label sweep=big: exit %d\n%s", code, out)
	}
	for _, id := range big {
		if j, err := c.Client(0).Job(ctx, id); err != nil || j.State != api.JobWithdrawn {
			t.Fatalf("job %s after the bulk withdraw: %s (%v), want withdrawn", id, j.State, err)
		}
	}
	if out, code := e31(append([]string{"wait"}, big...)...); code != 4 {
		t.Fatalf("e31 wait over withdrawn jobs: exit %d, want 4\n%s", code, out)
	}
	if out, code := e31("wait", named); code != 0 {
		t.Fatalf("e31 wait for run.sh: exit %d\n%s", code, out)
	}
}
