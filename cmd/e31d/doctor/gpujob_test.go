package doctor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/exec/nvidia"
)

var h100 = exec.GPU{Index: 0, UUID: "GPU-5e2f018a-9c41-4f1b-8e30-112233445566", Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, Minor: 0}

// probeOK is what e31d gpu-probe --json printed for h100 on a machine
// with a driver for CUDA 12.4.
const probeOK = `{"cuda":"12.4","device_count":1,"devices":[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-5e2f018a-9c41-4f1b-8e30-112233445566","memory_bytes":85045231616,"allocated_bytes":67108864,"kernel_ok":true,"elements":1048576,"kernel_ns":103000,"took_ns":312400000}]}`

func TestGPUJobResult(t *testing.T) {
	completed := exec.Result{Outcome: exec.Completed, Attribution: exec.ByJob, ExitCode: 0}
	failed := exec.Result{Outcome: exec.Failed, Attribution: exec.ByJob, ExitCode: 1, Reason: "exit status 1"}
	const cdi = "CDI (nvidia.com/gpu=0)"
	const fallback = "driver device nodes and libraries (no CDI spec names a GPU in /etc/cdi, /var/run/cdi)"
	for _, tc := range []struct {
		name      string
		injection string
		run       gpuJobRun
		status    Status
		detail    []string
		fix       string
	}{
		{"passes through CDI", cdi, gpuJobRun{Result: completed, Stdout: []byte(probeOK + "\n")}, OK, []string{
			"GPU 0 NVIDIA H100 80GB HBM3 (GPU-5e2f018a-9c41-4f1b-8e30-112233445566): visible in the sandbox as device 0, the only one even with CUDA_VISIBLE_DEVICES unset, 64 MiB allocated, kernel ran over 1048576 elements in 103µs, 312ms in all (CUDA 12.4); GPUs injected through CDI (nvidia.com/gpu=0)",
		}, ""},
		{"passes through the driver fallback", fallback, gpuJobRun{Result: completed, Stdout: []byte("a library's chatter\n" + probeOK)}, OK, []string{
			"kernel ran over 1048576 elements", "GPUs injected through driver device nodes and libraries (no CDI spec",
		}, ""},
		{"kernel fails", cdi, gpuJobRun{Result: failed,
			Stdout: []byte(`{"cuda":"12.4","device_count":1,"devices":[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-5e2f018a-9c41-4f1b-8e30-112233445566","memory_bytes":85045231616,"allocated_bytes":0,"kernel_ok":false,"elements":0,"kernel_ns":0,"took_ns":2000000,"error":"cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"}],"error":"device 0: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"}`),
			Stderr: []byte("NVRM: something the driver said\ne31d: GPU probe failed: device 0: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)\n")}, Fail, []string{
			"GPU 0 NVIDIA H100 80GB HBM3 (GPU-5e2f018a-9c41-4f1b-8e30-112233445566): the probe failed in the sandbox: device 0: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory); stderr: NVRM: something the driver said; GPUs injected through CDI (nvidia.com/gpu=0)",
		}, "nvidia-smi"},
		{"no driver in the sandbox", fallback, gpuJobRun{Result: failed,
			Stdout: []byte(`{"device_count":0,"devices":[],"error":"no NVIDIA driver: libcuda.so.1 not found (libcuda.so.1: cannot open shared object file: No such file or directory)","no_driver":true}`),
			Stderr: []byte("e31d: GPU probe failed: no NVIDIA driver: libcuda.so.1 not found (libcuda.so.1: cannot open shared object file: No such file or directory)\n")}, Fail, []string{
			"the probe failed in the sandbox: no NVIDIA driver: libcuda.so.1 not found", "GPUs injected through driver device nodes",
		}, "not visible in the sandbox"},
		{"driver does not start", fallback, gpuJobRun{Result: failed,
			Stdout: []byte(`{"device_count":0,"devices":[],"error":"cuInit: CUDA_ERROR_UNKNOWN (unknown error)"}`)}, Fail, []string{
			"the probe failed in the sandbox: cuInit: CUDA_ERROR_UNKNOWN (unknown error); GPUs injected through driver device nodes",
		}, "/dev/nvidia-uvm"},
		{"sees every GPU", cdi, gpuJobRun{Result: completed,
			Stdout: []byte(`{"cuda":"12.4","device_count":2,"devices":[{"index":0,"uuid":"GPU-5e2f018a-9c41-4f1b-8e30-112233445566","kernel_ok":true,"elements":1048576},{"index":1,"uuid":"GPU-00000000-0000-0000-0000-000000000001","kernel_ok":true,"elements":1048576}]}`)}, Fail, []string{
			"2 devices visible in the sandbox with CUDA_VISIBLE_DEVICES unset, want this one only",
		}, "only its leased GPUs"},
		{"sees every GPU, one failing", cdi, gpuJobRun{Result: failed,
			Stdout: []byte(`{"cuda":"12.4","device_count":2,"devices":[{"index":0,"uuid":"GPU-5e2f018a-9c41-4f1b-8e30-112233445566","kernel_ok":true,"elements":1048576},{"index":1,"error":"cuDeviceGetName: CUDA_ERROR_INVALID_DEVICE"}],"error":"device 1: cuDeviceGetName: CUDA_ERROR_INVALID_DEVICE"}`)}, Fail, []string{
			"2 devices visible in the sandbox",
		}, "only its leased GPUs"},
		{"sees another GPU", cdi, gpuJobRun{Result: completed,
			Stdout: []byte(`{"cuda":"12.4","device_count":1,"devices":[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-00000000-0000-0000-0000-000000000001","kernel_ok":true,"elements":1048576}]}`)}, Fail, []string{
			"the sandbox sees GPU-00000000-0000-0000-0000-000000000001 (NVIDIA H100 80GB HBM3) instead",
		}, "the GPU it leased"},
		{"binary does not run", cdi, gpuJobRun{Result: exec.Result{Outcome: exec.Failed, Attribution: exec.ByJob, ExitCode: 127, Reason: "exec: /e31/e31d: permission denied"},
			Stderr: []byte("runc run failed: unable to start container process: exec: \"/e31/e31d\": permission denied\n")}, Fail, []string{
			"the probe printed no result (failed, exec: /e31/e31d: permission denied); stderr: runc run failed",
		}, "the host's libc"},
		{"hangs", cdi, gpuJobRun{Result: exec.Result{Outcome: exec.Limit, Attribution: exec.ByJob, ExitCode: 143, Reason: "time limit 2m0s"}}, Fail, []string{
			"the probe printed no result (limit, time limit 2m0s); stderr: (empty)",
		}, "hung"},
		{"sandbox does not start", cdi, gpuJobRun{Result: exec.Result{Outcome: exec.Failed, Attribution: exec.ByProvider, ExitCode: -1},
			Err: fmt.Errorf("%w: no such device /dev/nvidia0", exec.ErrRuntime)}, Fail, []string{
			"the sandbox did not start: container runtime failed: no such device /dev/nvidia0",
		}, "runtime check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gpuJobResult(h100, tc.injection, tc.run)
			if r.Name != "gpu job 0" || r.Status != tc.status {
				t.Errorf("%s %s, want gpu job 0 %s: %s", r.Name, r.Status, tc.status, r.Detail)
			}
			for _, d := range tc.detail {
				if !strings.Contains(r.Detail, d) {
					t.Errorf("detail %q\nlacks %q", r.Detail, d)
				}
			}
			if !strings.Contains(r.Fix, tc.fix) || (tc.status != OK) != (r.Fix != "") {
				t.Errorf("fix %q, want one with %q", r.Fix, tc.fix)
			}
			if strings.Count(r.Detail, "GPU probe failed") > 0 {
				t.Errorf("the probe's error is repeated from stderr: %s", r.Detail)
			}
		})
	}
}

func TestNoGPUJob(t *testing.T) {
	r := noGPUJob(nvidia.Driver{}, fmt.Errorf("%w: libnvidia-ml.so.1 not found (no NVIDIA driver installed) (ERROR_LIBRARY_NOT_FOUND)", nvidia.ErrNoDriver))
	if r.Name != "gpu job" || r.Status != Warn || r.Detail != "no NVIDIA driver: no GPU job run (libnvidia-ml.so.1 not found (no NVIDIA driver installed) (ERROR_LIBRARY_NOT_FOUND))" || r.Fix == "" {
		t.Errorf("no driver: %+v", r)
	}
	r = noGPUJob(nvidia.Driver{Version: "550.54.15"}, nil)
	if r.Status != Warn || !strings.Contains(r.Detail, "driver 550.54.15 reports none") {
		t.Errorf("no GPUs: %+v", r)
	}
}

func TestCheckBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "e31d")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if r, ok := checkBinary(bin); ok || r.Status != Fail || !strings.Contains(r.Fix, "chmod 755") {
		t.Errorf("a binary only root can run: %v %+v", ok, r)
	}
	os.Chmod(bin, 0o755)
	if _, ok := checkBinary(bin); !ok {
		t.Error("a binary anyone can run was refused")
	}
}

func TestGPUJobDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "not", "yet")
	dir, cleanup, err := gpuJobDir(data)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(data, "doctor-gpu-job") {
		t.Errorf("job dir %s", dir)
	}
	if _, _, err := gpuJobDir(data); err == nil || !strings.Contains(err.Error(), "another e31d doctor --gpu-job") {
		t.Errorf("a second doctor got the job dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "stdout.log"), nil, 0o600)
	cleanup()
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data dir made for the jobs is still there: %v", err)
	}

	// What a crashed run left is cleared; the data dir that was there
	// stays.
	data = t.TempDir()
	left := filepath.Join(data, "doctor-gpu-job", "gpu0", "stdout.log")
	os.MkdirAll(filepath.Dir(left), 0o700)
	os.WriteFile(left, []byte("old"), 0o600)
	if _, cleanup, err = gpuJobDir(data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a crashed run's files are still there: %v", err)
	}
	cleanup()
	if _, err := os.Stat(data); err != nil {
		t.Errorf("the data dir went with the job dir: %v", err)
	}
}

// TestGPUJobsHere runs e31d doctor --gpu-job's check on this machine.
// Without a driver it must warn and leave nothing behind; with GPUs, it
// runs a freshly built e31d in the sandbox on each, and each must pass.
func TestGPUJobsHere(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, err := nvidia.Inspect(context.Background()); err != nil {
		rs := GPUJobs(context.Background(), GPUJobOptions{DataDir: data})
		if len(rs) != 1 || rs[0].Status != Warn || !strings.HasPrefix(rs[0].Detail, "no NVIDIA driver: no GPU job run (") {
			t.Errorf("without a driver: %+v", rs)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the data dir was made: %v", err)
		}
		return
	}
	requireSandbox(t)
	rs := GPUJobs(context.Background(), GPUJobOptions{DataDir: data, Binary: buildE31d(t)})
	for _, r := range rs {
		t.Logf("%s %s: %s (fix: %s)", r.Status, r.Name, r.Detail, r.Fix)
		if r.Status != OK {
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
	}
}

// TestGPUProbeInSandbox runs the real e31d's gpu-probe in a sandbox with no
// GPU, as doctor --gpu-job does with one: it proves that the shipped
// binary, linked against the host's libc, runs on the sandbox's root, and
// that it says what it found as JSON on stdout.
func TestGPUProbeInSandbox(t *testing.T) {
	requireSandbox(t)
	bin := buildE31d(t)
	// The mount root (for image jobs, not used here) must be
	// traversable by others, which t.TempDir is not.
	mnt, err := os.MkdirTemp("", "e31-doctor-mnt-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mnt)
	if err := os.Chmod(mnt, 0o711); err != nil {
		t.Fatal(err)
	}
	r, err := exec.NewRunner(context.Background(), exec.RunnerOptions{
		StateRoot:  filepath.Join(t.TempDir(), "state"),
		BundleRoot: filepath.Join(t.TempDir(), "bundles"),
		MountRoot:  filepath.Join(mnt, "root"),
		Log:        slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	run := runGPUJob(context.Background(), r, gpuJobSpec(filepath.Join(t.TempDir(), "lease"), bin, nil))
	t.Logf("%+v\nstdout: %s\nstderr: %s", run.Result, run.Stdout, run.Stderr)
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	var rep gpuprobe.Report
	if err := json.Unmarshal(lastLine(run.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not the probe's JSON: %v", err)
	}
	if run.Result.Outcome != exec.Failed || run.Result.ExitCode != 1 || rep.OK() || rep.Error == "" || rep.DeviceCount != 0 {
		t.Errorf("a probe with no GPU: %+v, report %+v", run.Result, rep)
	}
	// On a host without the driver the sandbox has none either; on one
	// with it, the library is there but no device is.
	if _, hostErr := gpuprobe.Probe(context.Background()); errors.Is(hostErr, gpuprobe.ErrNoDriver) {
		if !rep.NoDriver || !strings.Contains(rep.Error, "libcuda.so.1 not found") {
			t.Errorf("report %+v, want no_driver saying libcuda.so.1 was not found", rep)
		}
	}
	if !strings.Contains(string(run.Stderr), "e31d: GPU probe failed: ") {
		t.Errorf("stderr %q lacks e31d's error", run.Stderr)
	}
	res := gpuJobResult(h100, "CDI (nvidia.com/gpu=0)", run)
	if res.Status != Fail || !strings.Contains(res.Detail, "the probe failed in the sandbox: "+rep.Error) {
		t.Errorf("judged %+v", res)
	}
}

// TestGPUJobsWithSimulatedGPU runs the whole check, from the runner that
// compute.Open makes to the removal of its directories, with a simulated
// GPU: it enters the sandbox as its environment only, so the probe inside
// finds no driver and the check fails, saying so.
func TestGPUJobsWithSimulatedGPU(t *testing.T) {
	requireSandbox(t)
	bin := buildE31d(t)
	data := t.TempDir()
	sim := exec.GPU{Index: 0, UUID: "GPU-00000000-0000-4000-8000-000000000000", Model: "H100", MemoryBytes: 80 << 30, Simulated: true, Minor: -1}
	rs := runGPUJobs(context.Background(), GPUJobOptions{DataDir: data, Binary: bin}, []exec.GPU{sim})
	if len(rs) != 1 {
		t.Fatalf("results %+v", rs)
	}
	r := rs[0]
	t.Logf("%s %s: %s (fix: %s)", r.Status, r.Name, r.Detail, r.Fix)
	if r.Name != "gpu job 0" || r.Status != Fail || !strings.Contains(r.Detail, "GPU 0 H100 (GPU-00000000-0000-4000-8000-000000000000): the probe failed in the sandbox: ") ||
		!strings.Contains(r.Detail, "GPUs injected through none") {
		t.Errorf("result %+v", r)
	}
	if _, hostErr := gpuprobe.Probe(context.Background()); errors.Is(hostErr, gpuprobe.ErrNoDriver) && !strings.Contains(r.Detail, "libcuda.so.1 not found") {
		t.Errorf("detail %q does not say libcuda.so.1 was not found", r.Detail)
	}
	jobDir := filepath.Join(data, "doctor-gpu-job")
	// The runner's mount root for image jobs stays, empty, as a daemon's
	// does; its name is keyed by the job dir, which is fixed outside
	// tests. Here each run has its own, so it goes (rmdir only).
	stateRoot, _ := exec.RunDirRoots(exec.RunDirOf(jobDir))
	sum := sha256.Sum256([]byte(stateRoot))
	os.Remove(filepath.Join("/run/e31-rootfs", hex.EncodeToString(sum[:6])))
	for _, p := range []string{jobDir, exec.RunDirOf(jobDir)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
}

// requireSandbox skips where sandboxes cannot run (not root, no runc),
// unless E31_REQUIRE_RUNC=1 says this machine must run them.
func requireSandbox(t *testing.T) {
	t.Helper()
	_, err := osexec.LookPath("runc")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	msg := "sandboxed jobs need root and runc (apt-get install -y runc)"
	if os.Getenv("E31_REQUIRE_RUNC") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// buildE31d builds the e31d command, whose gpu-probe runs in the sandbox.
func buildE31d(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds e31d")
	}
	bin := filepath.Join(t.TempDir(), "e31d")
	cmd := osexec.Command("go", "build", "-o", bin, "github.com/e31network/e31/cmd/e31d")
	cmd.Env = os.Environ()
	if os.Getenv("CGO_CFLAGS") == "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build e31d: %v\n%s", err, out)
	}
	return bin
}
