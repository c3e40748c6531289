//go:build !cgo

package nvidia

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/e31network/e31/exec"
)

// Discover reports no GPUs: NVML is reached through cgo, and this binary
// was built without it.
func Discover(ctx context.Context, log *slog.Logger) []exec.GPU {
	if log != nil {
		log.InfoContext(ctx, "no GPUs: this binary was built without cgo, which NVML needs (rebuild with CGO_ENABLED=1)")
	}
	return nil
}

// Inspect reports ErrNoDriver: without cgo NVML cannot be loaded.
func Inspect(ctx context.Context) (Driver, error) {
	return Driver{}, fmt.Errorf("%w: this binary was built without cgo, which NVML needs (rebuild with CGO_ENABLED=1)", ErrNoDriver)
}
