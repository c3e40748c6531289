package exec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// newTestRunner returns a Runner on the real runtime with its own state
// root, or skips the test where that cannot work: not root, or no runtime.
// E31_REQUIRE_RUNC=1 turns those skips into failures.
func newTestRunner(t testing.TB) *Runner {
	t.Helper()
	skip := t.Skip
	if os.Getenv("E31_REQUIRE_RUNC") == "1" {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("sandbox tests need root to run runc with cgroup limits; run them as root (E31_REQUIRE_RUNC=1 makes this a failure)")
	}
	r, err := NewRunner(context.Background(), RunnerOptions{
		StateRoot: filepath.Join(t.TempDir(), "state"),
		MountRoot: testMountRoot(t),
		Log:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if errors.Is(err, ErrNoRuntime) {
		skip("no working OCI runtime (apt-get install -y runc; E31_REQUIRE_RUNC=1 makes this a failure): ", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testMountRoot is a mount root for image roots that the unprivileged
// job root can walk to (t.TempDir's parent is private). At the end it
// must hold no mount; it is then removed with rmdir only, so a leftover
// overlay fails the test instead of being deleted through.
func testMountRoot(t testing.TB) string {
	dir, err := os.MkdirTemp("", "e31-mnt-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m, _ := mountedUnder(dir); len(m) > 0 {
			t.Errorf("mounts left under the mount root: %v", m)
			return
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("mount root not empty: %v", err)
		}
	})
	return dir
}

// testSpec is a job running script with bash in a fresh lease directory
// under base (a new temp dir when base is "").
func testSpec(t testing.TB, base, script string) Spec {
	t.Helper()
	if base == "" {
		base = t.TempDir()
	}
	dir := filepath.Join(base, "lease")
	return Spec{
		ID:          "lease-" + strings.ReplaceAll(t.Name(), "/", "_"),
		Dir:         dir,
		Command:     []string{"/bin/bash", "-c", script},
		Output:      Mount{Source: filepath.Join(dir, "out"), Target: "/out"},
		MemoryBytes: 256 << 20,
		CPUs:        1,
		Limit:       60 * time.Second,
		Grace:       2 * time.Second,
	}
}

// runJob runs s and checks that nothing of the sandbox outlives the run.
func runJob(t testing.TB, ctx context.Context, r *Runner, s Spec) Result {
	t.Helper()
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatalf("Run: %v (result %+v)", err, res)
	}
	t.Logf("%s/%s exit %d %q after %v\nstdout: %s\nstderr: %s", res.Outcome, res.Attribution, res.ExitCode,
		res.Reason, res.Ended.Sub(res.Started), tail(readFile(t, res.Stdout)), tail(readFile(t, res.Stderr)))
	assertGone(t, r, s)
	return res
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// assertGone checks that the run left no container, bundle or cgroup.
func assertGone(t testing.TB, r *Runner, s Spec) {
	t.Helper()
	cid := ContainerID(s.ID)
	cs, err := r.rt.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ID == cid {
			t.Errorf("container %s still listed (%s)", cid, c.Status)
		}
	}
	if _, err := os.Stat(r.BundleDir(s.ID, s.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bundle dir still there: %v", err)
	}
	for _, m := range r.host.cgroups.mounts {
		if _, err := os.Stat(filepath.Join(m.point, r.host.cgroups.path(cid))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup dir left in %s: %v", m.point, err)
		}
	}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantOutcome(t *testing.T, res Result, outcome Outcome, attribution Attribution) {
	t.Helper()
	if res.Outcome != outcome || res.Attribution != attribution {
		t.Fatalf("got %s/%s (exit %d, %q), want %s/%s", res.Outcome, res.Attribution, res.ExitCode, res.Reason, outcome, attribution)
	}
}

// TestSandboxConfinement runs one job per property; each script exits 0
// when the property holds and says what it saw otherwise.
func TestSandboxConfinement(t *testing.T) {
	r := newTestRunner(t)
	base := t.TempDir()

	// Another lease's directory and a node's data directory, on the host
	// but outside every mount of the job.
	other := filepath.Join(base, "other-lease")
	secretDir := filepath.Join(base, "datadir")
	for _, d := range []string{other, secretDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	otherFile := filepath.Join(other, "result.bin")
	secretFile := filepath.Join(secretDir, "node.key")
	os.WriteFile(otherFile, []byte("other tenant"), 0o644)
	os.WriteFile(secretFile, []byte("secret key"), 0o644)

	// An input directory anyone may write to on the host: only the
	// read-only mount can stop the job.
	input := filepath.Join(base, "input")
	os.MkdirAll(input, 0o777)
	os.Chmod(input, 0o777)
	os.WriteFile(filepath.Join(input, "data.txt"), []byte("input data"), 0o666)
	os.Chmod(filepath.Join(input, "data.txt"), 0o666)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	erofs := func(cmd string) string {
		return fmt.Sprintf(`if %s 2>/tmp/err; then echo "succeeded: %s"; exit 1; fi; cat /tmp/err; grep -q "Read-only file system" /tmp/err`, cmd, cmd)
	}
	absent := func(p string) string {
		return fmt.Sprintf(`if cat %q; then exit 1; fi; test ! -e %q`, p, p)
	}
	cases := []struct{ name, script string }{
		{"writes output and checkpoint", `echo result > /out/r.txt && echo ckpt > "$E31_CHECKPOINT/c.txt" && test "$E31_OUTPUT" = /out && test "$PWD" = /out`},
		{"reads input", `test "$(cat /in/data.txt)" = "input data"`},
		{"root is read-only", erofs("touch /newfile")},
		{"usr is read-only", erofs("touch /usr/newfile")},
		{"etc is read-only", erofs("touch /etc/newfile")},
		{"input is read-only", erofs("touch /in/newfile")},
		{"input file is read-only", erofs("sh -c 'echo x >> /in/data.txt'")},
		{"other lease invisible", absent(otherFile)},
		{"data dir invisible", absent(secretFile)},
		{"no shadow", absent("/etc/shadow")},
		{"no host tmp or home", `test ! -e /root && test ! -e /home && test -z "$(ls -A /tmp)"`},
		{"no route to host loopback", fmt.Sprintf(`if timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/%d'; then echo connected; exit 1; fi`, port)},
		{"only loopback", `ls /sys/class/net; test "$(ls /sys/class/net)" = lo`},
		{"own pid namespace", `pids=$(ls /proc | grep -c '^[0-9]'); echo "pids: $pids"; ls /proc; test "$pids" -le 4`},
		{"no capabilities", `grep -E 'Cap|NoNew|Seccomp:' /proc/self/status; grep -q 'CapBnd:	0000000000000000' /proc/self/status && grep -q 'CapEff:	0000000000000000' /proc/self/status && grep -q 'NoNewPrivs:	1' /proc/self/status && grep -q 'Seccomp:	2' /proc/self/status`},
		{"runs as a uid of its own", fmt.Sprintf(`id; test "$(id -un):$(id -gn)" = job:job && test "$(id -u)" = "$(id -g)" && test "$(id -u)" -ge %d && test "$(id -u)" -lt %d`, DefaultJobUIDBase, DefaultJobUIDBase+jobUIDCount)},
		{"seccomp denies unshare", `if unshare -U true 2>/tmp/err; then echo "unshare worked"; exit 1; fi; cat /tmp/err; grep -q "not permitted" /tmp/err`},
		{"tmp is private and writable", `echo x > /tmp/f && test "$(stat -c %a /tmp)" = 1777`},
		{"pids limit applied", `cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null | grep -qx 1024`},
	}
	// In parallel, which also shows that one Runner runs jobs side by side.
	t.Run("jobs", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				s := testSpec(t, base+"/"+strings.ReplaceAll(c.name, " ", "-"), c.script)
				s.Inputs = []Mount{{Source: input, Target: "/in"}}
				ckpt := filepath.Join(s.Dir, "ckpt")
				s.Checkpoint = &Mount{Source: ckpt, Target: "/ckpt"}
				res := runJob(t, context.Background(), r, s)
				wantOutcome(t, res, Completed, ByJob)
			})
		}
	})
	select {
	case <-accepted:
		t.Error("a job connected to the host's 127.0.0.1")
	default:
	}
	// What the jobs wrote landed on the host; what they could not write
	// did not.
	if got := readFile(t, filepath.Join(base, "writes-output-and-checkpoint", "lease", "ckpt", "c.txt")); got != "ckpt\n" {
		t.Errorf("checkpoint file: %q", got)
	}
	if got := readFile(t, filepath.Join(input, "data.txt")); got != "input data" {
		t.Errorf("input changed: %q", got)
	}
}

func TestOOM(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", `head -c 600M /dev/zero | tail`)
	s.MemoryBytes = 64 << 20
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Failed, ByJob)
	if res.Reason != ReasonOOM {
		t.Errorf("reason %q, want oom", res.Reason)
	}
}

func TestForkBombHeldByPids(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", `:(){ :|:& };: ; sleep 30`)
	s.Pids = 64
	s.Limit = 3 * time.Second
	s.Grace = time.Second
	res := runJob(t, context.Background(), r, s)
	if res.Outcome != Limit {
		t.Errorf("outcome %s, want limit", res.Outcome)
	}
	if took := res.Ended.Sub(res.Started); took > s.Limit+s.Grace+10*time.Second {
		t.Errorf("took %v", took)
	}
	if !strings.Contains(readFile(t, res.Stderr), "Resource temporarily unavailable") {
		t.Error("no fork failure in stderr: the pids limit did not bite")
	}
}

// A job that ignores SIGTERM is killed: at once, since waiting out its
// grace could change nothing (stop.go).
func TestIgnoredTermIsKilled(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", `trap '' TERM; while :; do sleep 0.1; done`)
	s.Limit = time.Second
	s.Grace = 30 * time.Second
	before := runtime.NumGoroutine()
	res := runJob(t, context.Background(), r, s)
	checkNoLeak(t, before)
	wantOutcome(t, res, Limit, ByJob)
	if res.Reason != "signal: killed" {
		t.Errorf("reason %q, want signal: killed", res.Reason)
	}
	if took := res.Ended.Sub(res.Started); took > s.Limit+s.Grace/2 {
		t.Errorf("took %v: the grace of %v was waited out for a job that ignores SIGTERM", took, s.Grace)
	}
}

// A program run as the job's command is the init of the container's PID
// namespace, and the kernel drops a SIGTERM sent to an init without a
// handler for it: `sleep`, like `python3 train.py`, never sees the stop.
// It is killed without waiting out its grace.
func TestTermToAnInitWithoutAHandler(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", "")
	s.Command = []string{"sleep", "600"}
	s.Limit = time.Second
	s.Grace = 30 * time.Second
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Limit, ByJob)
	if took := res.Ended.Sub(res.Started); took > s.Limit+s.Grace/2 {
		t.Errorf("took %v: the grace of %v was waited out for an init that cannot get SIGTERM", took, s.Grace)
	}
}

func TestExitCode(t *testing.T) {
	r := newTestRunner(t)
	res := runJob(t, context.Background(), r, testSpec(t, "", `echo failing >&2; exit 3`))
	wantOutcome(t, res, Failed, ByJob)
	if res.ExitCode != 3 || res.Reason != "exit status 3" {
		t.Errorf("exit %d %q", res.ExitCode, res.Reason)
	}
	if got := readFile(t, res.Stderr); got != "failing\n" {
		t.Errorf("stderr %q", got)
	}
}

// A job that dies writing where its sandbox is read-only (a checkpoint
// folder it never declared) is told where it may write and how to declare
// one.
func TestReadOnlyWriteHint(t *testing.T) {
	r := newTestRunner(t)
	res := runJob(t, context.Background(), r, testSpec(t, "", `mkdir -p /ckpt && echo 1 > /ckpt/state`))
	wantOutcome(t, res, Failed, ByJob)
	if !strings.Contains(res.Reason, "it wrote to /ckpt where its sandbox is read-only") ||
		!strings.Contains(res.Reason, "under /out, /tmp and /dev/shm") || !strings.Contains(res.Reason, "--checkpoint-path") {
		t.Errorf("reason %q", res.Reason)
	}
}

func TestCommandNotFound(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", "")
	s.Command = []string{"/no/such/program"}
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Failed, ByJob)
	if res.ExitCode != 127 || !strings.Contains(res.Reason, "/no/such/program") {
		t.Errorf("exit %d %q", res.ExitCode, res.Reason)
	}
}

func TestCancelStopsWithCheckpoint(t *testing.T) {
	r := newTestRunner(t)
	// The handler takes a while, in a child that does not handle SIGTERM
	// itself: the grace holds while the shell that does is there.
	s := testSpec(t, "", `trap 'sleep 1.5; echo saved > "$E31_CHECKPOINT/state"; exit 0' TERM; touch /out/started; while :; do sleep 0.1; done`)
	s.Checkpoint = &Mount{Source: filepath.Join(s.Dir, "ckpt"), Target: "/ckpt"}
	s.Grace = 20 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(s.Output.Source, "started")); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res := runJob(t, ctx, r, s)
	wantOutcome(t, res, Stopped, ByProvider)
	if res.ExitCode != 0 {
		t.Errorf("exit %d: the job's TERM handler did not run", res.ExitCode)
	}
	if got := readFile(t, filepath.Join(s.Checkpoint.Source, "state")); got != "saved\n" {
		t.Errorf("checkpoint %q", got)
	}
	if took := res.Ended.Sub(res.Started); took > 10*time.Second {
		t.Errorf("took %v: stopped by SIGKILL, not SIGTERM", took)
	}
}

func TestSimulatedGPUsVisible(t *testing.T) {
	r := newTestRunner(t)
	gpus, err := ParseSimSpec("2xH100:80GiB", "12D3KooWtest")
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, "", `echo "$CUDA_VISIBLE_DEVICES"; echo "$NVIDIA_VISIBLE_DEVICES"; ls /dev/nvidia* 2>/dev/null && exit 1; exit 0`)
	s.GPUs = gpus
	s.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,2,3"} // the runner's value wins
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	want := gpus[0].UUID + "," + gpus[1].UUID
	if got := readFile(t, res.Stdout); got != want+"\n"+want+"\n" {
		t.Errorf("stdout %q, want the UUIDs %s twice", got, want)
	}
}

func TestLogKeepsTail(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", `for i in $(seq 1 20000); do echo "line $i"; done`)
	s.LogCap = 10 << 10
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	out := readFile(t, res.Stdout)
	if int64(len(out)) != s.LogCap || !strings.HasSuffix(out, "\nline 20000\n") {
		t.Errorf("kept %d bytes ending %q", len(out), out[max(0, len(out)-30):])
	}
}

func TestSweep(t *testing.T) {
	r := newTestRunner(t)
	start := func(id string) Spec {
		s := testSpec(t, "", "sleep 60")
		s.ID = id
		s, err := s.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if err := prepareDirs(s); err != nil {
			t.Fatal(err)
		}
		if err := handOverWritable(s, jobUID, jobGID); err != nil {
			t.Fatal(err)
		}
		cid := ContainerID(id)
		if err := writeBundle(bundleDir(s.Dir), sandboxConfig(s, cid, r.host, nil), r.host); err != nil {
			t.Fatal(err)
		}
		// Detached, as if the daemon that started it had died.
		// No pipes: the container would hold them open.
		if err := r.rt.command(context.Background(), "run", "--detach", "--bundle", bundleDir(s.Dir), cid).Run(); err != nil {
			t.Fatalf("run --detach: %v", err)
		}
		return s
	}
	dead, live := start("sweep-dead"), start("sweep-live")
	defer r.Cleanup(context.Background(), live.ID, live.Dir)
	err := r.Sweep(context.Background(), func(id string) bool { return id == live.ID })
	if err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, dead)
	cs, err := r.rt.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != ContainerID(live.ID) || cs[0].Status != "running" {
		t.Errorf("after sweep: %+v, want only %s running", cs, ContainerID(live.ID))
	}
	if err := r.Cleanup(context.Background(), live.ID, live.Dir); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, live)
	if err := r.Cleanup(context.Background(), live.ID, live.Dir); err != nil {
		t.Errorf("second cleanup: %v", err)
	}
}

func TestNoRuntime(t *testing.T) {
	_, err := NewRunner(context.Background(), RunnerOptions{
		Runtime:   "/nonexistent/runc",
		StateRoot: filepath.Join(t.TempDir(), "state"),
	})
	if !errors.Is(err, ErrNoRuntime) || !errors.Is(err, ErrRuntimeNotFound) || !strings.Contains(err.Error(), "apt-get install -y runc") {
		t.Fatalf("err = %v, want ErrNoRuntime and ErrRuntimeNotFound with an install hint", err)
	}
}

// BenchmarkSandboxStart measures a whole sandboxed run of `date +%s%N`
// (ms/op: bundle, runtime, job, teardown) and the time from calling Run
// to the job's first instruction (ms-to-first).
func BenchmarkSandboxStart(b *testing.B) {
	r := newTestRunner(b)
	s := testSpec(b, "", "")
	s.Command = []string{"date", "+%s%N"}
	var first time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := r.Run(context.Background(), s)
		if err != nil || res.Outcome != Completed {
			b.Fatalf("%v %+v", err, res)
		}
		first += sinceStamp(b, t0, readFile(b, res.Stdout))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first")
}

// BenchmarkForkExec is the same command run directly, for comparison.
func BenchmarkForkExec(b *testing.B) {
	var first time.Duration
	for b.Loop() {
		t0 := time.Now()
		out, err := exec.Command("date", "+%s%N").Output()
		if err != nil {
			b.Fatal(err)
		}
		first += sinceStamp(b, t0, string(out))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first")
}

// sinceStamp is how long after t0 the nanosecond timestamp in out was
// taken.
func sinceStamp(b *testing.B, t0 time.Time, out string) time.Duration {
	var ns int64
	if _, err := fmt.Sscan(strings.TrimSpace(out), &ns); err != nil {
		b.Fatalf("timestamp %q: %v", out, err)
	}
	return time.Unix(0, ns).Sub(t0)
}

func TestProviderFailures(t *testing.T) {
	r := newTestRunner(t)

	t.Run("runtime fails to start", func(t *testing.T) {
		broken := *r
		broken.rt.path = "/bin/false"
		s := testSpec(t, "", "true")
		res, err := broken.Run(context.Background(), s)
		if !errors.Is(err, ErrRuntime) || res.Outcome != Failed || res.Attribution != ByProvider {
			t.Fatalf("err %v, result %+v; want ErrRuntime, failed/provider", err, res)
		}
		assertGone(t, r, s)
	})
	t.Run("leased GPU missing", func(t *testing.T) {
		s := testSpec(t, "", "true")
		s.GPUs = []GPU{{UUID: "GPU-gone", Minor: 99}}
		res, err := r.Run(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), "/dev/nvidia99") || res.Attribution != ByProvider {
			t.Fatalf("err %v, result %+v", err, res)
		}
		assertGone(t, r, s)
	})
	t.Run("input missing", func(t *testing.T) {
		s := testSpec(t, "", "true")
		s.Inputs = []Mount{{Source: "/nonexistent/input", Target: "/in"}}
		if _, err := r.Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "/in") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("cancelled before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := r.Run(ctx, testSpec(t, "", "true"))
		if err != nil || res.Outcome != Stopped {
			t.Fatalf("err %v, result %+v", err, res)
		}
	})
}

// checkNoLeak fails if more goroutines run than before a run, once the
// ones winding down have finished: it waits for that, up to a deadline far
// beyond what a loaded machine needs, so that only a real leak fails it.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines 30s after the run, %d before", runtime.NumGoroutine(), before)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSweepRemovesOrphanBundles: a bundle whose container the runtime no
// longer lists (the daemon died as the runtime deleted it, or before it
// created one) is removed by Sweep unless its lease is live, and so is an
// empty state directory the runtime left; what is not one of this
// runner's bundles is left alone.
func TestSweepRemovesOrphanBundles(t *testing.T) {
	r := newTestRunner(t)
	r.bundleRoot = t.TempDir()
	bundle := func(name, lease string) string {
		dir := filepath.Join(r.bundleRoot, name)
		if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`{"annotations":{%q:%q}}`, leaseAnnotation, lease)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dead := bundle(ContainerID("orphan-dead"), "orphan-dead")
	live := bundle(ContainerID("orphan-live"), "orphan-live")
	other := bundle("not-ours", "orphan-dead")
	// The runtime's state directory of a container it was killed while
	// deleting: empty, so not listed.
	emptyState := filepath.Join(r.rt.root, ContainerID("orphan-dead"))
	if err := os.MkdirAll(emptyState, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := r.Sweep(context.Background(), func(id string) bool { return id == "orphan-live" }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead lease's bundle is still there: %v", err)
	}
	if _, err := os.Stat(emptyState); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runtime's empty state directory is still there: %v", err)
	}
	for _, dir := range []string{live, other} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}
