//go:build !cgo

package nvidia

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/e31network/e31/exec"
)

// UseReader would read what uses the machine's GPUs through NVML; this
// binary was built without cgo, which NVML needs, so it watches no GPUs.
type UseReader struct {
	mu     sync.Mutex
	closed bool // guarded by mu
}

// UseOptions configure OpenUse. The zero value is ready to use.
type UseOptions struct {
	// IsSandbox reports whether a host PID belongs to a job sandbox
	// (unused without cgo).
	IsSandbox func(pid int) (bool, error)
	// Log is where OpenUse says why no GPU is watched.
	Log *slog.Logger
}

// OpenUse returns a reader of no GPUs, and logs one line saying why.
func OpenUse(ctx context.Context, o UseOptions) *UseReader {
	if o.Log != nil {
		o.Log.InfoContext(ctx, "GPU use not watched: this binary was built without cgo, which NVML needs (rebuild with CGO_ENABLED=1)")
	}
	return &UseReader{}
}

// Use reports no GPUs.
func (r *UseReader) Use(ctx context.Context) ([]exec.GPUUse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("GPU use: reader closed")
	}
	return nil, nil
}

// Close marks the reader closed. It is idempotent.
func (r *UseReader) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}
