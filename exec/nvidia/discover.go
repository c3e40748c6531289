//go:build cgo

package nvidia

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/e31network/e31/exec"
)

// Discover lists the machine's NVIDIA GPUs. It never fails: a machine
// without the driver, or one NVML cannot use, has zero GPUs, and Discover
// logs one line saying why. A GPU that NVML lists but cannot describe is
// left out with a warning, since a GPU of unknown memory cannot be offered.
func Discover(ctx context.Context, log *slog.Logger) []exec.GPU {
	return discover(ctx, log, nvml.New())
}

// discover is Discover over any NVML implementation, so that tests can use
// go-nvml's mock servers.
func discover(ctx context.Context, log *slog.Logger, lib nvml.Interface) []exec.GPU {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		log.InfoContext(ctx, "no GPUs: "+initFailure(ret), "nvml", ret.Error())
		return nil
	}
	defer lib.Shutdown()

	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		log.InfoContext(ctx, "no GPUs: NVML cannot count devices", "nvml", ret.Error())
		return nil
	}
	gpus := make([]exec.GPU, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			log.InfoContext(ctx, "no GPUs: discovery cancelled", "err", err)
			return nil
		}
		g, what, ret := describe(lib, i)
		if ret != nvml.SUCCESS {
			log.WarnContext(ctx, "GPU left out: NVML cannot read its "+what, "index", i, "nvml", ret.Error())
			continue
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		log.InfoContext(ctx, "no GPUs: NVML reports none")
	}
	return gpus
}

// describe reads one device; on failure it names the property it could not
// read.
func describe(lib nvml.Interface, i int) (exec.GPU, string, nvml.Return) {
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return exec.GPU{}, "handle", ret
	}
	g := exec.GPU{Index: i}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return exec.GPU{}, "UUID", ret
	}
	if g.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
		return exec.GPU{}, "name", ret
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return exec.GPU{}, "memory", ret
	}
	g.MemoryBytes = mem.Total
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return exec.GPU{}, "minor number", ret
	}
	return g, "", nvml.SUCCESS
}

// initFailure says, for an operator, why NVML did not start.
func initFailure(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to open the NVIDIA devices"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the NVML library and the kernel driver are different versions (reboot after a driver upgrade)"
	default:
		return "NVML failed to initialise"
	}
}

// Inspect reports the driver and its GPUs for a health check. Unlike
// Discover it returns NVML's failure, wrapped in ErrNoDriver, rather than
// logging it.
func Inspect(ctx context.Context) (Driver, error) {
	return inspect(ctx, nvml.New())
}

func inspect(ctx context.Context, lib nvml.Interface) (Driver, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return Driver{}, fmt.Errorf("%w: %s (%s)", ErrNoDriver, initFailure(ret), ret.Error())
	}
	defer lib.Shutdown()
	var d Driver
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		d.Version = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		d.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	d.GPUs = discover(ctx, nil, lib)
	return d, nil
}
