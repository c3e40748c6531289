//go:build cgo

package nvidia

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/e31network/e31/exec"
)

// UseReader reads what uses the machine's GPUs, through NVML: the
// processes on each GPU that no job sandbox holds, and each GPU's
// utilisation. It holds NVML initialised from OpenUse to Close: one Init
// for its life rather than one for each sample, every two seconds, each of
// which would load the library and wake the driver again. NVML counts its
// initialisations, so Discover's own Init and Shutdown before each run
// leave this one's alone.
//
// A machine without a usable driver has no GPUs to read: OpenUse logs why
// once, and Use reports nothing. A GPU whose processes or utilisation NVML
// cannot read is reported with what could be read; each such failure is
// logged once, not at every sample.
type UseReader struct {
	// Immutable after OpenUse.
	lib       nvml.Interface // nil: NVML not initialised, no GPUs
	gpus      []usedGPU
	isSandbox func(pid int) (bool, error)
	log       *slog.Logger

	mu     sync.Mutex
	logged map[string]bool // failures already logged; guarded by mu
	closed bool            // guarded by mu
}

// usedGPU is one GPU that UseReader watches.
type usedGPU struct {
	index int
	uuid  string
	dev   nvml.Device
}

// UseOptions configure OpenUse. The zero value is ready to use.
type UseOptions struct {
	// IsSandbox reports whether a host PID belongs to a job sandbox.
	// Default: exec.IsSandboxPID. An error wrapping fs.ErrNotExist means
	// the process has ended and it is left out; any other error counts
	// the process as foreign, since it cannot be shown to be a job's.
	IsSandbox func(pid int) (bool, error)
	// Log is where failures are said, once each. Default: discarded.
	Log *slog.Logger
}

// OpenUse initialises NVML and lists the GPUs to watch. It never fails:
// without a usable driver the reader watches no GPUs, and OpenUse logs
// one line saying why. Close releases NVML.
func OpenUse(ctx context.Context, o UseOptions) *UseReader {
	return openUse(ctx, nvml.New(), o)
}

// openUse is OpenUse over any NVML implementation, so that tests can use
// go-nvml's mocks.
func openUse(ctx context.Context, lib nvml.Interface, o UseOptions) *UseReader {
	if o.IsSandbox == nil {
		o.IsSandbox = exec.IsSandboxPID
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &UseReader{isSandbox: o.IsSandbox, log: o.Log, logged: map[string]bool{}}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		r.log.InfoContext(ctx, "GPU use not watched: "+initFailure(ret), "nvml", ret.Error())
		return r
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		r.log.WarnContext(ctx, "GPU use not watched: NVML cannot count devices", "nvml", ret.Error())
		lib.Shutdown()
		return r
	}
	// Handles and UUIDs do not change while NVML is initialised, so they
	// are read once rather than at every sample.
	for i := range n {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			r.log.WarnContext(ctx, "GPU use not watched on this GPU: NVML cannot get its handle", "index", i, "nvml", ret.Error())
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			r.log.WarnContext(ctx, "GPU use not watched on this GPU: NVML cannot read its UUID", "index", i, "nvml", ret.Error())
			continue
		}
		r.gpus = append(r.gpus, usedGPU{index: i, uuid: uuid, dev: dev})
	}
	r.lib = lib
	return r
}

// Use samples every watched GPU, in index order. It fails only when ctx
// has ended or the reader is closed; what NVML cannot read of a GPU is
// left out of that GPU's entry (no processes, utilisation unknown) and
// logged once.
func (r *UseReader) Use(ctx context.Context) ([]exec.GPUUse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errors.New("GPU use: reader closed")
	}
	out := make([]exec.GPUUse, 0, len(r.gpus))
	for _, g := range r.gpus {
		out = append(out, r.sample(ctx, g))
	}
	return out, nil
}

// sample reads one GPU.
func (r *UseReader) sample(ctx context.Context, g usedGPU) exec.GPUUse {
	u := exec.GPUUse{Index: g.index, UUID: g.uuid, Utilization: exec.UtilizationUnknown}
	var pids []int
	for _, list := range []struct {
		what string
		get  func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{"compute processes", g.dev.GetComputeRunningProcesses},
		{"graphics processes", g.dev.GetGraphicsRunningProcesses},
	} {
		procs, ret := list.get()
		if ret != nvml.SUCCESS {
			r.failed(ctx, g, list.what, ret)
			continue
		}
		for _, p := range procs {
			// A process with both a compute and a graphics context is
			// listed twice.
			if pid := int(p.Pid); !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		in, err := r.isSandbox(pid)
		switch {
		case err == nil && in:
		case errors.Is(err, fs.ErrNotExist):
			// It ended between NVML's list and the look: gone, not a user.
		case err != nil:
			// Logged once in all: PIDs are many, and one such failure
			// says what the rest would.
			r.logOnce(ctx, slog.LevelWarn, "sandbox", "GPU process counted as the owner's: cannot tell whether a job runs it",
				"index", g.index, "pid", pid, "err", err)
			u.ForeignPIDs = append(u.ForeignPIDs, pid)
		default:
			u.ForeignPIDs = append(u.ForeignPIDs, pid)
		}
	}
	if rates, ret := g.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		u.Utilization = int(min(rates.Gpu, 100))
	} else {
		r.failed(ctx, g, "utilisation", ret)
	}
	return u
}

// failed logs, once for each GPU, property and NVML code, that a property
// could not be read. NOT_SUPPORTED is a fact of the GPU (graphics
// processes on a compute-only board, utilisation on some older ones),
// said at Info; anything else is a fault, said at Warn.
func (r *UseReader) failed(ctx context.Context, g usedGPU, what string, ret nvml.Return) {
	key := fmt.Sprintf("%d/%s/%d", g.index, what, ret)
	if ret == nvml.ERROR_NOT_SUPPORTED {
		r.logOnce(ctx, slog.LevelInfo, key, "GPU use: this GPU does not report its "+what, "index", g.index)
		return
	}
	r.logOnce(ctx, slog.LevelWarn, key, "GPU use: NVML cannot read this GPU's "+what, "index", g.index, "nvml", ret.Error())
}

// logOnce logs the first time key is seen.
func (r *UseReader) logOnce(ctx context.Context, level slog.Level, key, msg string, args ...any) {
	r.mu.Lock()
	seen := r.logged[key]
	r.logged[key] = true
	r.mu.Unlock()
	if !seen {
		r.log.Log(ctx, level, msg, args...)
	}
}

// Close releases NVML; Use fails after it. It is idempotent. Call it once
// no Use is in flight (after the watcher's Run has returned): a sample
// holds no lock while it calls NVML, so nothing stops a Shutdown under it.
func (r *UseReader) Close() error {
	r.mu.Lock()
	was := r.closed
	r.closed = true
	r.mu.Unlock()
	if was || r.lib == nil {
		return nil
	}
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("GPU use: NVML shutdown: %w", ret)
	}
	return nil
}
