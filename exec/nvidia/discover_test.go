//go:build cgo

package nvidia

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func TestDiscoverDGXH200(t *testing.T) {
	srv := dgxh200.New()
	var logs bytes.Buffer
	gpus := discover(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), srv)
	if len(gpus) != 8 {
		t.Fatalf("%d GPUs, want 8; log: %s", len(gpus), logs.String())
	}
	for i, g := range gpus {
		d := srv.Devices[i].(*server.Device)
		if g.Index != i || g.UUID != d.UUID || !strings.HasPrefix(g.UUID, "GPU-") || g.Minor != d.Minor ||
			g.Model != "NVIDIA H200 141GB HBM3e" || g.MemoryBytes != 144384<<20 || g.Simulated {
			t.Errorf("GPU %d = %+v, want index %d uuid %s minor %d, H200 with 141 GiB", i, g, i, d.UUID, d.Minor)
		}
	}
	if logs.Len() != 0 {
		t.Errorf("logged on success: %s", logs.String())
	}
}

func TestDiscoverWithoutDriver(t *testing.T) {
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
			gpus := discover(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), lib)
			if len(gpus) != 0 {
				t.Errorf("%d GPUs", len(gpus))
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "no GPUs") {
				t.Errorf("want one Info line saying why, got %q", logs.String())
			}
		})
	}
}

func TestDiscoverSkipsUnreadableGPU(t *testing.T) {
	srv := dgxh200.New()
	srv.Devices[3].(*server.Device).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	var logs bytes.Buffer
	gpus := discover(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), srv)
	if len(gpus) != 7 {
		t.Fatalf("%d GPUs, want 7", len(gpus))
	}
	for _, g := range gpus {
		if g.Index == 3 {
			t.Error("the unreadable GPU was kept")
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "index=3") {
		t.Errorf("log: %s", logs.String())
	}
}

// Discover on this machine must not fail whether or not it has a driver.
func TestDiscoverHere(t *testing.T) {
	var logs bytes.Buffer
	gpus := Discover(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
	t.Logf("%d GPUs; log: %s", len(gpus), logs.String())
	if len(gpus) == 0 && strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("zero GPUs should log exactly one line, got %q", logs.String())
	}
}

func TestInspectDGXH200(t *testing.T) {
	d, err := inspect(context.Background(), dgxh200.New())
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "550.54.15" || d.CUDA != "12.4" || len(d.GPUs) != 8 {
		t.Errorf("driver %q, CUDA %q, %d GPUs; want 550.54.15, 12.4, 8", d.Version, d.CUDA, len(d.GPUs))
	}
}

func TestInspectWithoutDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := inspect(context.Background(), lib)
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("err = %v, want ErrNoDriver naming the library", err)
	}
}
