package speed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/testnet/bench"
)

// SandboxLimit is what starting the trivial job's sandbox costs on this
// machine, and the throughput that cost allows.
type SandboxLimit struct {
	Runtime string `json:"runtime"`
	Runs    int    `json:"runs"`
	// BareCPUMs is the CPU (user+system, runtime and job) of one bare
	// `runc run` of a ready bundle; BareWallMs its wall time.
	BareCPUMs  float64      `json:"bare_cpu_ms"`
	BareWallMs bench.Spread `json:"bare_wall_ms"`
	// RunnerCPUMs is the CPU of one exec.Runner.Run of the same job: the
	// bundle, cgroups and cleanup e31 adds around the runtime.
	RunnerCPUMs float64 `json:"runner_cpu_ms"`
	Cores       int     `json:"cores"`
	// JobsPerS is Cores / BareCPUMs: the most jobs a second this machine
	// could start if it did nothing else.
	JobsPerS float64 `json:"jobs_per_s"`
}

// MeasureSandboxLimit builds the bundle e31's runner makes for the trivial
// job (by running one that waits and copying its bundle while it runs),
// then runs that bundle `runs` times with the bare runtime, one at a time,
// and takes the CPU from the rusage of this process's children. Needs root.
func MeasureSandboxLimit(ctx context.Context, dir string, runs int) (SandboxLimit, error) {
	lim := SandboxLimit{Runs: max(runs, 1), Cores: runtime.NumCPU()}
	if os.Geteuid() != 0 {
		return lim, errors.New("the sandbox limit runs runc: run as root")
	}
	// The runtime's state and the bundles where a daemon keeps them, so
	// that the bare runs and the daemons' write them alike.
	runDir, _ := exec.RunDir(dir)
	if runDir == "" {
		runDir = filepath.Join(dir, "run")
	}
	defer os.RemoveAll(runDir)
	state, bundles := exec.RunDirRoots(runDir)
	r, err := exec.NewRunner(ctx, exec.RunnerOptions{StateRoot: state, BundleRoot: bundles})
	if err != nil {
		return lim, err
	}
	lim.Runtime = r.Runtime()
	bare := filepath.Join(runDir, "bare")
	if err := captureBundle(ctx, r, filepath.Join(dir, "capture"), bare); err != nil {
		return lim, err
	}
	run := func(i int) error {
		cmd := osexec.CommandContext(ctx, lim.Runtime, "--root", state, "run", "--bundle", bare, fmt.Sprintf("e31-bench-bare-%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("bare %s run: %w: %s", lim.Runtime, err, out)
		}
		return nil
	}
	// The first run warms the page cache and the runtime's binary.
	if err := run(0); err != nil {
		return lim, err
	}
	before := childrenCPU()
	var wall []float64
	for i := 1; i <= lim.Runs; i++ {
		t0 := time.Now()
		if err := run(i); err != nil {
			return lim, err
		}
		wall = append(wall, bench.Ms(time.Since(t0)))
	}
	lim.BareCPUMs = bench.Ms(childrenCPU()-before) / float64(lim.Runs)
	lim.BareWallMs = bench.SpreadOf(wall)
	if lim.BareCPUMs <= 0 {
		return lim, fmt.Errorf("%d runs of %s took no measurable CPU", lim.Runs, lim.Runtime)
	}
	lim.JobsPerS = float64(lim.Cores) / (lim.BareCPUMs / 1000)

	// The same job through e31's runner, for what it adds around runc.
	runnerRuns := max(lim.Runs/2, 1)
	before = childrenCPU() + selfCPU()
	for i := range runnerRuns {
		id := fmt.Sprintf("bench-runner-%d", i)
		leaseDir := filepath.Join(dir, id)
		res, err := r.Run(ctx, trivialSpec(id, leaseDir, []string{"true"}))
		if err != nil {
			return lim, fmt.Errorf("runner: %w", err)
		}
		if res.Outcome != exec.Completed {
			return lim, fmt.Errorf("runner: the trivial job ended %s: %s", res.Outcome, res.Reason)
		}
	}
	lim.RunnerCPUMs = bench.Ms(childrenCPU()+selfCPU()-before) / float64(runnerRuns)
	return lim, nil
}

// trivialSpec is what a provider's runner gets for the trivial job: the
// declaration's defaults of 1 CPU and 1 GiB, output at /out.
func trivialSpec(id, dir string, cmd []string) exec.Spec {
	return exec.Spec{
		ID: id, Dir: dir, Command: cmd,
		Output: exec.Mount{Source: filepath.Join(dir, "out"), Target: "/out"},
		CPUs:   1, MemoryBytes: 1 << 30,
		Grace: 200 * time.Millisecond,
	}
}

// captureBundle runs a job that waits, copies the bundle the runner made
// for it once the container is up, stops it, and makes the copy run
// `true`. The runner removes its bundle after every run, and writing one
// by hand would measure a different sandbox.
func captureBundle(ctx context.Context, r *exec.Runner, leaseDir, dst string) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	type ran struct {
		res exec.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(runCtx, trivialSpec("bench-capture", leaseDir, []string{"sleep", "600"}))
		done <- ran{res, err}
	}()
	bundle := r.BundleDir("bench-capture", leaseDir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(bundle, "pid")); err == nil {
			break
		}
		select {
		case d := <-done:
			return fmt.Errorf("the capture job ended before its bundle could be copied: %s (%v)", d.res.Reason, d.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the capture job's container did not start in 30s")
		}
	}
	// cp -a keeps the skeleton's symlinks, modes and owners as they are.
	if out, err := osexec.CommandContext(ctx, "cp", "-a", bundle, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy bundle: %w: %s", err, out)
	}
	stop()
	if d := <-done; d.err != nil {
		return fmt.Errorf("stop the capture job: %w", d.err)
	}
	for _, f := range []string{"pid", "runtime.log"} {
		_ = os.Remove(filepath.Join(dst, f))
	}
	return setArgs(filepath.Join(dst, "config.json"), []string{"true"})
}

// setArgs changes process.args of an OCI config and nothing else.
func setArgs(path string, args []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var proc map[string]json.RawMessage
	if err := json.Unmarshal(cfg["process"], &proc); err != nil {
		return fmt.Errorf("%s: process: %w", path, err)
	}
	if proc["args"], err = json.Marshal(args); err != nil {
		return err
	}
	if cfg["process"], err = json.Marshal(proc); err != nil {
		return err
	}
	if b, err = json.Marshal(cfg); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// childrenCPU is the user+system CPU of this process's children that have
// been waited for.
func childrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

// selfCPU is the user+system CPU of this process.
func selfCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
