package compute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/provider"
)

// Options say what to look for (node.Config).
type Options struct {
	// DataDir is the node's data dir: the run directory falls back to a
	// folder in it, and the job disks' templates live in it.
	DataDir string
	// SimGPUs, when set, are simulated GPUs ("4xH100:80GiB") in place of
	// discovery.
	SimGPUs string
	// Discover finds the machine's real GPUs when SimGPUs is empty (e31d
	// passes nvidia.Discover); nil means none.
	Discover func(context.Context, *slog.Logger) []exec.GPU
	// Runtime is the OCI runtime binary; default runc, else crun.
	Runtime string
	// Runner, when set, stands in for the OCI sandbox (tests).
	Runner provider.Runner
	// SeeGPUs, when set, replaces the check of the GPUs before a run
	// (tests).
	SeeGPUs func(context.Context) []exec.GPU
	Log     *slog.Logger
}

// Machine is what Open found. Immutable after Open.
type Machine struct {
	GPUs []exec.GPU
	// Runner runs jobs; nil: no GPUs or no working OCI runtime, so no
	// compute offered.
	Runner provider.Runner
	// Runtime is the OCI runtime's path, for GET /v1/id ("test" for a
	// stand-in).
	Runtime string
	runDir  string // the sandbox's run directory (exec.RunDir); "" without one
	o       Options
}

// Open finds the GPUs, named by self for simulated ones (their UUIDs), and
// where there are any starts the sandbox. Only a bad SimGPUs is an error:
// a node without a sandbox still works, offering no compute. Close removes
// the run directory Open made.
func Open(ctx context.Context, self string, o Options) (*Machine, error) {
	m := &Machine{o: o}
	if o.SimGPUs != "" {
		gpus, err := exec.ParseSimSpec(o.SimGPUs, self)
		if err != nil {
			return nil, fmt.Errorf("--sim-gpus: %w", err)
		}
		m.GPUs = gpus
	} else if o.Discover != nil {
		m.GPUs = o.Discover(ctx, o.Log)
	} else {
		o.Log.Info("no GPUs: this program does not look for real ones (use --sim-gpus for simulated GPUs)")
	}
	switch {
	case len(m.GPUs) == 0:
	case o.Runner != nil:
		m.Runner, m.Runtime = o.Runner, "test"
	default:
		runDir, err := exec.RunDir(o.DataDir)
		switch {
		case runDir == "":
			runDir = filepath.Join(o.DataDir, "run")
			o.Log.Warn("no run directory for the sandbox under /run: using "+runDir, "err", err)
		case err != nil:
			o.Log.Warn("the sandbox's run directory is on a disk: each job's start costs more CPU", "err", err)
		}
		m.runDir = runDir
		stateRoot, bundleRoot := exec.RunDirRoots(runDir)
		r, err := exec.NewRunner(ctx, exec.RunnerOptions{Runtime: o.Runtime, Log: o.Log,
			StateRoot: stateRoot, BundleRoot: bundleRoot})
		if err == nil {
			m.Runner, m.Runtime = r, r.Runtime()
			break
		}
		// Without a working sandbox the node still submits, fetches and
		// verifies; it only offers no compute.
		hint := "install one with: apt-get install -y runc"
		switch {
		case os.Geteuid() != 0 && !errors.Is(err, exec.ErrRuntimeNotFound):
			hint = "run e31d as root or through the systemd unit: the sandbox runs as root"
		case !errors.Is(err, exec.ErrNoRuntime):
			hint = "the runtime failed its probe; check it, or pick another with --runtime"
		}
		o.Log.Warn("no working OCI runtime: this node offers no compute but can still submit jobs; "+hint, "err", err)
	}
	return m, nil
}

// Offers reports whether the node offers compute: GPUs, and a sandbox to
// run jobs on them in.
func (m *Machine) Offers() bool { return len(m.GPUs) > 0 && m.Runner != nil }

// Close removes the sandbox's run directory, if Open made one.
func (m *Machine) Close() error {
	if m.runDir == "" {
		return nil
	}
	return exec.RemoveRunDir(m.runDir)
}

// SeeGPUs is how the provider checks, before each run, which GPUs the
// machine has: the driver asked again for real GPUs, so that a final
// receipt names what the run had rather than what the node found at start;
// nil (the list found at start) for simulated ones, which report their
// simulated UUIDs and models.
func (m *Machine) SeeGPUs() func(context.Context) []exec.GPU {
	switch {
	case m.o.SeeGPUs != nil:
		return m.o.SeeGPUs
	case m.o.SimGPUs != "" || m.o.Discover == nil:
		return nil
	}
	return func(ctx context.Context) []exec.GPU { return m.o.Discover(ctx, m.o.Log) }
}

// jobDisks makes the filesystems that bound what each job writes
// (provider.Disks), with exec, each a copy of a formatted template.
type jobDisks struct{ maker exec.DiskMaker }

func (d jobDisks) Mount(ctx context.Context, dir string, bytes uint64) (exec.Disk, error) {
	return d.maker.Mount(ctx, dir, bytes)
}
func (jobDisks) Remove(dir string) error { return exec.RemoveDisk(dir) }
func (jobDisks) Sweep(root string, keep func(id string) bool) error {
	return exec.SweepDisks(root, keep)
}

// Disks is nil where a job's writes cannot be bounded (DiskQuotas says
// why), and where the runner is a stand-in for tests.
func (m *Machine) Disks() provider.Disks {
	if _, real := m.Runner.(*exec.Runner); !real || m.DiskQuotas() != nil {
		return nil
	}
	return jobDisks{maker: exec.DiskMaker{Templates: filepath.Join(m.o.DataDir, "disk-templates")}}
}

// DiskQuotas says why a job's disk cannot be bounded here (no loop
// devices, no mkfs.ext4), or nil where it can, or where no real sandbox
// runs jobs to bound: a node with no compute, or a stand-in runner that
// writes nothing.
func (m *Machine) DiskQuotas() error {
	if _, real := m.Runner.(*exec.Runner); !real {
		return nil
	}
	return exec.DiskSupport()
}
