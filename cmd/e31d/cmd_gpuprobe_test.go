package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/cmd/e31d/doctor"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/exec/nvidia"
)

// TestGPUProbeCommand runs gpu-probe --json in this process: one JSON
// object on stdout whatever happens, and an error exactly when the probe
// failed.
func TestGPUProbeCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := newGPUProbeCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--json"})
	err := cmd.ExecuteContext(context.Background())
	t.Logf("stdout: %s", out.String())
	var rep gpuprobe.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || strings.Count(strings.TrimSpace(out.String()), "\n") != 0 {
		t.Fatalf("stdout is not one JSON object: %v", jerr)
	}
	if rep.OK() != (err == nil) || (err != nil && !errors.Is(err, errGPUProbe)) {
		t.Errorf("report OK %v, error %v", rep.OK(), err)
	}
	if _, hostErr := gpuprobe.Probe(context.Background()); errors.Is(hostErr, gpuprobe.ErrNoDriver) {
		if !rep.NoDriver || !strings.Contains(rep.Error, "libcuda.so.1 not found") || !strings.Contains(err.Error(), "libcuda.so.1 not found") {
			t.Errorf("without a driver: report %+v, error %v", rep, err)
		}
	}
}

// TestGPUProbeUnsetsVisibleDevices: the flag doctor --gpu-job passes must
// reach the driver, which reads CUDA_VISIBLE_DEVICES when loaded.
func TestGPUProbeUnsetsVisibleDevices(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--json"}, "GPU-5e2f018a-9c41-4f1b-8e30-112233445566"},
		{[]string{"--json", "--unset-cuda-visible-devices"}, ""},
	} {
		t.Setenv("CUDA_VISIBLE_DEVICES", "GPU-5e2f018a-9c41-4f1b-8e30-112233445566")
		var out bytes.Buffer
		cmd := newGPUProbeCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		_ = cmd.ExecuteContext(context.Background())
		var rep gpuprobe.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.CUDAVisibleDevices != tc.want {
			t.Errorf("%v: the driver read CUDA_VISIBLE_DEVICES=%q, want %q", tc.args, rep.CUDAVisibleDevices, tc.want)
		}
	}
}

// TestGPUProbeIsRegistered: doctor --gpu-job runs `e31d gpu-probe` in the
// sandbox, so the daemon's command must have it, out of sight.
func TestGPUProbeIsRegistered(t *testing.T) {
	c, _, err := newCommand().Find([]string{"gpu-probe"})
	if err != nil || c.Name() != "gpu-probe" {
		t.Fatalf("e31d has no gpu-probe command (%v): add newGPUProbeCommand() to the list in newCommand", err)
	}
	if !c.Hidden {
		t.Error("gpu-probe is not hidden")
	}
}

// TestDoctorGPUJobWithoutDriver runs the built e31d's doctor --gpu-job on
// a machine without an NVIDIA driver: it must warn that no GPU job ran and
// exit 0 unless another check failed.
func TestDoctorGPUJobWithoutDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds e31d")
	}
	if _, err := nvidia.Inspect(context.Background()); err == nil {
		t.Skip("this machine has an NVIDIA driver: cmd/e31d/doctor's TestGPUJobsHere runs the jobs")
	}
	dir := t.TempDir()
	bin := buildDaemon(t, dir)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "doctor", "--gpu-job", "--json", "--data", data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d\n%s%s", code, out, stderr.String())
	var rep doctor.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("not the report's JSON: %v", err)
	}
	last := rep.Checks[len(rep.Checks)-1]
	if last.Name != "gpu job" || last.Status != doctor.Warn || !strings.HasPrefix(last.Detail, "no NVIDIA driver: no GPU job run (") || last.Fix == "" {
		t.Errorf("last check %+v, want the gpu job's warning", last)
	}
	if want := min(rep.Count(doctor.Fail), 1); code != want {
		t.Errorf("exit %d with %d failed checks", code, rep.Count(doctor.Fail))
	}
	_, runcErr := exec.LookPath("runc")
	if os.Geteuid() == 0 && runcErr == nil && code != 0 {
		t.Errorf("exit %d as root with runc: only warnings were expected", code)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the GPU check left the data dir behind: %v", err)
	}
}
