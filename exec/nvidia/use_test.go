//go:build cgo

package nvidia

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// idleDGX is a mocked 8× H200 machine on which nothing runs: the mock
// server leaves process lists and utilisation unset, and an unset mock
// method panics.
func idleDGX() *server.Server {
	srv := dgxh200.New()
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
	}
	return srv
}

func procs(pids ...uint32) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) {
		out := make([]nvml.ProcessInfo, len(pids))
		for i, p := range pids {
			out[i] = nvml.ProcessInfo{Pid: p, UsedGpuMemory: 1 << 30}
		}
		return out, nvml.SUCCESS
	}
}

func failing(ret nvml.Return) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ret }
}

// fakeSandbox places PIDs: 1xx in a job's sandbox, 3xx ended, 4xx
// unreadable, anything else on the host.
func fakeSandbox(pid int) (bool, error) {
	switch pid / 100 {
	case 1:
		return true, nil
	case 3:
		return false, fmt.Errorf("process %d: %w", pid, fs.ErrNotExist)
	case 4:
		return false, fmt.Errorf("process %d: %w", pid, fs.ErrPermission)
	}
	return false, nil
}

func TestUseDGXH200(t *testing.T) {
	srv := idleDGX()
	dev := func(i int) *server.Device { return srv.Devices[i].(*server.Device) }
	// GPU 0: a job (101), the owner (200) with both a compute and a
	// graphics context, and a process that ended (300).
	dev(0).GetComputeRunningProcessesFunc = procs(101, 200)
	dev(0).GetGraphicsRunningProcessesFunc = procs(200, 300)
	dev(0).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 97}, nvml.SUCCESS }
	// GPU 1: a compute-only board; only a job.
	dev(1).GetGraphicsRunningProcessesFunc = failing(nvml.ERROR_NOT_SUPPORTED)
	dev(1).GetComputeRunningProcessesFunc = procs(102)
	dev(1).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 55}, nvml.SUCCESS }
	// GPU 2: lost; what it ran cannot be read.
	dev(2).GetComputeRunningProcessesFunc = failing(nvml.ERROR_GPU_IS_LOST)
	dev(2).GetGraphicsRunningProcessesFunc = failing(nvml.ERROR_GPU_IS_LOST)
	dev(2).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	// GPU 3: a process whose cgroup cannot be read counts as the owner's.
	dev(3).GetComputeRunningProcessesFunc = procs(401)

	var logs bytes.Buffer
	ctx := context.Background()
	r := openUse(ctx, srv, UseOptions{IsSandbox: fakeSandbox, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	want := map[int]struct {
		foreign []int
		util    int
	}{0: {[]int{200}, 97}, 1: {nil, 55}, 2: {nil, -1}, 3: {[]int{401}, 0}}
	for range 3 {
		use, err := r.Use(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(use) != 8 {
			t.Fatalf("%d GPUs, want 8", len(use))
		}
		for i, u := range use {
			w := want[i]
			if u.Index != i || u.UUID != dev(i).UUID || !slices.Equal(u.ForeignPIDs, w.foreign) || u.Utilization != w.util {
				t.Errorf("GPU %d: %+v, want UUID %s, foreign %v, utilisation %d", i, u, dev(i).UUID, w.foreign, w.util)
			}
		}
	}
	// Three samples, each failure said once: GPU 1's missing graphics
	// list (Info), GPU 2's three properties (Warn), GPU 3's process.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 5 {
		t.Errorf("%d log lines, want 5:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{
		"level=INFO msg=\"GPU use: this GPU does not report its graphics processes\" index=1",
		"level=WARN msg=\"GPU use: NVML cannot read this GPU's compute processes\" index=2",
		"level=WARN msg=\"GPU use: NVML cannot read this GPU's utilisation\" index=2",
		"pid=401",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Use(ctx); err == nil {
		t.Error("Use after Close did not fail")
	}
}

// One Init for the reader's life, however many samples; one Shutdown.
func TestUseInitOnce(t *testing.T) {
	srv := idleDGX()
	r := openUse(context.Background(), srv, UseOptions{IsSandbox: fakeSandbox})
	for range 10 {
		if _, err := r.Use(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if i, s := len(srv.InitCalls()), len(srv.ShutdownCalls()); i != 1 || s != 1 {
		t.Errorf("%d Init and %d Shutdown calls, want 1 and 1", i, s)
	}
}

func TestUseWithoutDriver(t *testing.T) {
	for _, ret := range []nvml.Return{
		nvml.ERROR_LIBRARY_NOT_FOUND,
		nvml.ERROR_DRIVER_NOT_LOADED,
		nvml.ERROR_NO_PERMISSION,
		nvml.ERROR_LIB_RM_VERSION_MISMATCH,
		nvml.ERROR_UNKNOWN,
	} {
		t.Run(ret.Error(), func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
			var logs bytes.Buffer
			r := openUse(context.Background(), lib, UseOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
			for range 3 {
				use, err := r.Use(context.Background())
				if err != nil || len(use) != 0 {
					t.Fatalf("Use = %v, %v; want no GPUs", use, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "GPU use not watched") {
				t.Errorf("want one Info line saying why, got %q", logs.String())
			}
			// An Init that failed is not shut down (the mock would panic).
		})
	}
}

func TestUseCannotCount(t *testing.T) {
	srv := idleDGX()
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	r := openUse(context.Background(), srv, UseOptions{})
	if use, err := r.Use(context.Background()); err != nil || len(use) != 0 {
		t.Fatalf("Use = %v, %v; want no GPUs", use, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if s := len(srv.ShutdownCalls()); s != 1 {
		t.Errorf("%d Shutdown calls, want 1: the Init that worked is released", s)
	}
}

func TestUseCancelled(t *testing.T) {
	r := openUse(context.Background(), idleDGX(), UseOptions{IsSandbox: fakeSandbox})
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Use(ctx); err == nil {
		t.Error("Use with a cancelled context did not fail")
	}
}

// OpenUse on this machine must not fail whether or not it has a driver,
// and a process of this test is never a job's.
func TestUseHere(t *testing.T) {
	var logs bytes.Buffer
	r := OpenUse(context.Background(), UseOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	defer r.Close()
	use, err := r.Use(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d GPUs; log: %s", len(use), logs.String())
	for _, u := range use {
		t.Logf("GPU %d %s: foreign %v, utilisation %d%%", u.Index, u.UUID, u.ForeignPIDs, u.Utilization)
	}
	if len(use) == 0 && strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("zero GPUs should log exactly one line, got %q", logs.String())
	}
}
