//go:build cgo

package exec

import (
	"context"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Discover lists the machine's NVIDIA GPUs. It never fails: a machine
// without the driver, or one NVML cannot use, has zero GPUs, and Discover
// logs one line saying why. A GPU that NVML lists but cannot describe is
// left out with a warning, since a GPU of unknown memory cannot be offered.
func Discover(ctx context.Context, log *slog.Logger) []GPU {
	return discover(ctx, log, nvml.New())
}

// discover is Discover over any NVML implementation, so that tests can use
// go-nvml's mock servers.
func discover(ctx context.Context, log *slog.Logger, lib nvml.Interface) []GPU {
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
	gpus := make([]GPU, 0, n)
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
func describe(lib nvml.Interface, i int) (GPU, string, nvml.Return) {
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return GPU{}, "handle", ret
	}
	g := GPU{Index: i}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return GPU{}, "UUID", ret
	}
	if g.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
		return GPU{}, "name", ret
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, "memory", ret
	}
	g.MemoryBytes = mem.Total
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return GPU{}, "minor number", ret
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
