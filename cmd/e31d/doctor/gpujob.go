package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/exec/nvidia"
	"github.com/e31network/e31/node/compute"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// GPUJobOptions say how e31d doctor --gpu-job runs its jobs.
type GPUJobOptions struct {
	// DataDir is e31d's --data. The jobs' lease directories go in
	// DATA/doctor-gpu-job, removed afterwards: on the disk leases use,
	// and apart from a running daemon's.
	DataDir string
	// Runtime is --runtime; empty means runc, else crun.
	Runtime string
	// Binary is the e31d that runs `gpu-probe` in the sandbox. Default:
	// this program.
	Binary string
}

// The GPU job: the binary mounted as an input and run as the command, with
// what a small job would ask for.
const (
	gpuJobBinary = "/e31/e31d"
	gpuJobLimit  = 2 * time.Minute
	gpuJobMemory = 2 << 30
	gpuJobLogCap = 1 << 20
)

// GPUJobs runs one sandboxed job on each of this machine's GPUs, through
// the runner leases use, and returns one result per GPU ("gpu job N"): the
// job runs `e31d gpu-probe --json`, which runs a CUDA kernel on every
// device it sees, and the result says what the sandbox saw. A machine
// without a driver or GPUs gets a single warning and runs nothing.
func GPUJobs(ctx context.Context, o GPUJobOptions) []Result {
	d, err := nvidia.Inspect(ctx)
	if err != nil || len(d.GPUs) == 0 {
		return []Result{noGPUJob(d, err)}
	}
	return runGPUJobs(ctx, o, d.GPUs)
}

// runGPUJobs runs the job on each of gpus.
func runGPUJobs(ctx context.Context, o GPUJobOptions, gpus []exec.GPU) []Result {
	var err error
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return []Result{result("gpu job", Fail, "", "cannot find this program to run in the sandbox: %v", err)}
		}
	}
	if r, ok := checkBinary(bin); !ok {
		return []Result{r}
	}

	root, cleanup, err := gpuJobDir(o.DataDir)
	if err != nil {
		fix := "create the data dir or name another with --data"
		if errors.Is(err, unix.EWOULDBLOCK) {
			fix = "wait for the other one to end"
		}
		return []Result{result("gpu job", Fail, fix, "no directory for the GPU jobs: %v", err)}
	}
	defer cleanup()
	runner, closeRunner, err := openRunner(ctx, root, o.Runtime, gpus)
	if err != nil {
		return []Result{result("gpu job", Fail, "see the runtime check: the GPU jobs need the sandbox leases run in", "no sandbox to run the GPU jobs in: %v", err)}
	}
	defer closeRunner()

	out := make([]Result, 0, len(gpus))
	for _, g := range gpus {
		spec := gpuJobSpec(filepath.Join(root, "gpu"+strconv.Itoa(g.Index)), bin, []exec.GPU{g})
		run := runGPUJob(ctx, runner, spec)
		out = append(out, gpuJobResult(g, injection(g, runner.GPUInjection()), run))
	}
	return out
}

// noGPUJob is the one result of a machine whose GPUs cannot be probed.
func noGPUJob(d nvidia.Driver, err error) Result {
	if err != nil {
		why := strings.TrimPrefix(err.Error(), nvidia.ErrNoDriver.Error()+": ")
		fix := "on a machine with an NVIDIA GPU, install the driver and run this again"
		if !errors.Is(err, nvidia.ErrNoDriver) {
			fix = ""
		}
		return result("gpu job", Warn, fix, "no NVIDIA driver: no GPU job run (%s)", why)
	}
	return result("gpu job", Warn, "check nvidia-smi: the driver is loaded but reports no GPU",
		"no GPUs: driver %s reports none, so no GPU job run", d.Version)
}

// checkBinary checks that the sandbox's user (nobody) can run bin.
func checkBinary(bin string) (Result, bool) {
	st, err := os.Stat(bin)
	if err != nil {
		return result("gpu job", Fail, "", "the e31d binary to run in the sandbox: %v", err), false
	}
	if st.Mode().Perm()&0o005 != 0o005 {
		return result("gpu job", Fail, "chmod 755 "+bin,
			"%s is mode %v: jobs run as nobody, who cannot execute it in the sandbox", bin, st.Mode().Perm()), false
	}
	return Result{}, true
}

// gpuJobDir makes DATA/doctor-gpu-job, where the jobs' lease directories
// go (dataDir is made if missing, and then removed again with it), locked
// against a second doctor, and returns a function that removes it. The name
// is fixed so that a run after a crash reuses what the crashed one left
// (the runtime's state, the runner's mount root, both keyed by it) rather
// than leaving more; what the crash left in it is removed first. Nothing is
// ever mounted in it: the jobs have no disk and no image.
func gpuJobDir(dataDir string) (string, func(), error) {
	_, statErr := os.Stat(dataDir)
	dir := filepath.Join(dataDir, "doctor-gpu-job")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return "", nil, fmt.Errorf("%s is in use: is another e31d doctor --gpu-job running? (%w)", dir, err)
	}
	entries, err := f.ReadDir(-1)
	for _, e := range entries {
		if err == nil {
			err = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if err != nil {
		f.Close()
		return "", nil, err
	}
	return dir, func() {
		os.RemoveAll(dir)
		f.Close() // the lock goes with it
		if errors.Is(statErr, os.ErrNotExist) {
			os.Remove(dataDir) // only if empty
		}
	}, nil
}

// openRunner starts the sandbox as the daemon does (compute.Open, which
// leases' runner comes from), keyed by dir so that its run directory,
// runtime state and cgroups are apart from a daemon running here.
func openRunner(ctx context.Context, dir, runtime string, gpus []exec.GPU) (*exec.Runner, func(), error) {
	warned := &warnings{}
	m, err := compute.Open(ctx, "", compute.Options{
		DataDir:  dir,
		Discover: func(context.Context, *slog.Logger) []exec.GPU { return gpus },
		Runtime:  runtime,
		Log:      slog.New(warned),
	})
	if err != nil {
		return nil, nil, err
	}
	r, ok := m.Runner.(*exec.Runner)
	if !ok {
		m.Close()
		return nil, nil, errors.New(warned.String())
	}
	return r, func() {
		r.Close()
		m.Close()
	}, nil
}

// gpuJobSpec is the job that probes gpus from inside the sandbox, with
// its lease directory dir. The probe unsets CUDA_VISIBLE_DEVICES, which the
// runner sets to the leased GPUs: without it the driver sees every GPU
// whose device the sandbox lets in, so its count shows whether the sandbox
// isolates them.
func gpuJobSpec(dir, bin string, gpus []exec.GPU) exec.Spec {
	id := "doctor-gpu-job"
	for _, g := range gpus {
		id += "-" + strconv.Itoa(g.Index)
	}
	return exec.Spec{
		ID:          id,
		Dir:         dir,
		Command:     []string{gpuJobBinary, "gpu-probe", "--json", "--unset-cuda-visible-devices"},
		Inputs:      []exec.Mount{{Source: bin, Target: gpuJobBinary}},
		Output:      exec.Mount{Source: filepath.Join(dir, "out"), Target: "/out"},
		GPUs:        gpus,
		CPUs:        1,
		MemoryBytes: gpuJobMemory,
		Limit:       gpuJobLimit,
		Grace:       5 * time.Second,
		LogCap:      gpuJobLogCap,
	}
}

// gpuJobRun is what a GPU job left: the runner's result and error, and the
// job's stdout and stderr.
type gpuJobRun struct {
	Result         exec.Result
	Err            error
	Stdout, Stderr []byte
}

func runGPUJob(ctx context.Context, r *exec.Runner, s exec.Spec) gpuJobRun {
	var run gpuJobRun
	run.Result, run.Err = r.Run(ctx, s)
	if run.Result.Stdout != "" {
		run.Stdout, _ = os.ReadFile(run.Result.Stdout)
	}
	if run.Result.Stderr != "" {
		run.Stderr, _ = os.ReadFile(run.Result.Stderr)
	}
	return run
}

// injection says how g enters the sandbox: by the CDI name the runner
// looks up (its UUID, else its index, in the default spec directories),
// else by the driver fallback, which described (Runner.GPUInjection)
// names.
func injection(g exec.GPU, described string) string {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(exec.DefaultCDISpecDirs...), cdi.WithAutoRefresh(false))
	if err == nil {
		for _, id := range []string{g.UUID, strconv.Itoa(g.Index)} {
			if name := "nvidia.com/gpu=" + id; cache.GetDevice(name) != nil {
				return "CDI (" + name + ")"
			}
		}
	}
	if strings.HasPrefix(described, "cdi") {
		return "the driver's device nodes (CDI specs are there, but none names this GPU)"
	}
	return described
}

// gpuJobResult judges one GPU's job, g's, from what it left; injection is
// how the GPU entered the sandbox.
func gpuJobResult(g exec.GPU, injection string, run gpuJobRun) Result {
	name := "gpu job " + strconv.Itoa(g.Index)
	who := fmt.Sprintf("GPU %d %s (%s)", g.Index, g.Model, g.UUID)
	const reinject = "regenerate the CDI spec (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml); without one, check that /dev/nvidia* and the driver's libraries are on the host"
	if run.Err != nil {
		return result(name, Fail, "fix what the runtime check says, or what the error names", "%s: the sandbox did not start: %v", who, run.Err)
	}
	var rep gpuprobe.Report
	if err := json.Unmarshal(lastLine(run.Stdout), &rep); err != nil {
		fix := "run the probe outside the sandbox: e31d gpu-probe"
		switch {
		case run.Result.Outcome == exec.Limit:
			fix = "the probe hung in the sandbox; check nvidia-smi for the GPU's state, then run e31d gpu-probe outside it"
		case run.Result.ExitCode == 127:
			fix = "the sandbox cannot run the e31d binary: build it on this machine (the sandbox has the host's libc, which a cgo binary links against)"
		}
		return result(name, Fail, fix, "%s: the probe printed no result (%s, %s); stderr: %s",
			who, run.Result.Outcome, run.Result.Reason, stderrTail(run.Stderr, ""))
	}
	// Isolation first: a job that can reach other GPUs matters more than
	// how the probe fared on them.
	if rep.DeviceCount > 1 {
		return result(name, Fail, "a job must see only its leased GPUs: "+reinject,
			"%s: %d devices visible in the sandbox with CUDA_VISIBLE_DEVICES unset, want this one only; GPUs injected through %s", who, rep.DeviceCount, injection)
	}
	if len(rep.Devices) == 1 && rep.Devices[0].UUID != "" && rep.Devices[0].UUID != g.UUID {
		d := rep.Devices[0]
		return result(name, Fail, "a job must see the GPU it leased: "+reinject,
			"%s: the sandbox sees %s (%s) instead; GPUs injected through %s", who, d.UUID, d.Name, injection)
	}
	if rep.Error != "" || !rep.OK() {
		what := rep.Error
		for _, d := range rep.Devices {
			if d.Error != "" && what == "" {
				what = fmt.Sprintf("device %d: %s", d.Index, d.Error)
			}
		}
		if what == "" {
			what = "no device passed"
		}
		fix := "check the GPU outside the sandbox (nvidia-smi, e31d gpu-probe); if it works there, " + reinject
		switch {
		case rep.NoDriver:
			fix = "the driver's libraries are not visible in the sandbox: " + reinject
		case strings.HasPrefix(rep.Error, "cuInit: "):
			// CUDA does not start without the unified-memory device, which
			// the host has only once its module is loaded, and the
			// fallback injects only the nodes the host has.
			fix = "the driver does not start in the sandbox: check that nvidia-smi works and that /dev/nvidia-uvm exists on the host (nvidia-modprobe -u -c=0 makes it); then " + reinject
		}
		detail := fmt.Sprintf("%s: the probe failed in the sandbox: %s", who, what)
		if t := stderrTail(run.Stderr, rep.Error); t != "" {
			detail += "; stderr: " + t
		}
		return Result{Name: name, Status: Fail, Detail: detail + "; GPUs injected through " + injection, Fix: fix}
	}
	d := rep.Devices[0]
	return result(name, OK, "", "%s: visible in the sandbox as device %d, the only one even with CUDA_VISIBLE_DEVICES unset, %d MiB allocated, kernel ran over %d elements in %s, %s in all (CUDA %s); GPUs injected through %s",
		who, d.Index, d.AllocatedBytes>>20, d.Elements, d.KernelTook.Round(time.Microsecond), d.Took.Round(time.Millisecond), rep.CUDA, injection)
}

// lastLine is the last non-empty line of out: the probe prints one JSON
// line, and anything before it (a library's message) is not it.
func lastLine(out []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return []byte(lines[len(lines)-1])
}

// stderrTail is the last lines of a job's stderr on one line, leaving out
// those that only repeat known (the probe's error, which e31d prints again
// on its way out).
func stderrTail(stderr []byte, known string) string {
	var keep []string
	for l := range strings.SplitSeq(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || known != "" && strings.Contains(l, known) {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 3 {
		keep = keep[len(keep)-3:]
	}
	s := strings.Join(keep, " / ")
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	if s == "" && known == "" {
		return "(empty)"
	}
	return s
}

// warnings keeps the warnings of compute.Open, which logs why it made no
// runner rather than returning it.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" (%s: %v)", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lines) == 0 {
		return "no runner and no warning saying why"
	}
	return strings.Join(w.lines, "; ")
}
