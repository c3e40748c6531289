package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
)

// The GPU probe before a lease's run, on real GPUs: the probe of e31d
// doctor --gpu-job (`e31d gpu-probe --json`, this program mounted into the
// sandbox as its command), run by the leases' own runner on the leased
// GPUs alone, so that what it reports is what the job would see.
const (
	probeBinary = "/e31/e31d"
	probeLimit  = time.Minute
	probeMemory = 2 << 30
	probeLogCap = 1 << 20
)

// ProbeGPUs is how the provider probes a lease's real GPUs before its run
// (provider.Deps.ProbeGPUs): nil for simulated GPUs, which answer with
// their simulated identity, and where no sandbox runs jobs.
func (m *Machine) ProbeGPUs() func(context.Context, []exec.GPU) (gpuprobe.Report, error) {
	if m.o.SimGPUs != "" || m.o.Runner != nil || m.Runner == nil {
		return nil
	}
	return m.probe
}

// probe runs the GPU probe on gpus in a sandbox of its own, in a folder
// under the data dir removed afterwards.
func (m *Machine) probe(ctx context.Context, gpus []exec.GPU) (gpuprobe.Report, error) {
	bin, err := os.Executable()
	if err != nil {
		return gpuprobe.Report{}, fmt.Errorf("find this program to run in the sandbox: %w", err)
	}
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = strings.TrimPrefix(g.UUID, "GPU-")
	}
	id := "gpu-probe-" + strings.Join(ids, "-")
	dir := filepath.Join(m.o.DataDir, "gpu-probe", id)
	// The runner makes the lease directory, as for e31d doctor --gpu-job.
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return gpuprobe.Report{}, err
	}
	defer os.RemoveAll(dir)
	res, err := m.Runner.Run(ctx, exec.Spec{
		ID:          id,
		Dir:         dir,
		Command:     []string{probeBinary, "gpu-probe", "--json"},
		Inputs:      []exec.Mount{{Source: bin, Target: probeBinary}},
		Output:      exec.Mount{Source: filepath.Join(dir, "out"), Target: "/out"},
		GPUs:        gpus,
		CPUs:        1,
		MemoryBytes: probeMemory,
		Limit:       probeLimit,
		Grace:       5 * time.Second,
		LogCap:      probeLogCap,
	})
	if err != nil {
		return gpuprobe.Report{}, fmt.Errorf("the probe's sandbox did not start: %w", err)
	}
	out, err := os.ReadFile(res.Stdout)
	if err != nil {
		return gpuprobe.Report{}, fmt.Errorf("the probe's output: %w", err)
	}
	var rep gpuprobe.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return gpuprobe.Report{}, fmt.Errorf("the probe printed no report (%s, exit %d): %w", res.Outcome, res.ExitCode, err)
	}
	if rep.Error != "" {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}
