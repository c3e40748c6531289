//go:build !cgo

package exec

import (
	"context"
	"log/slog"
)

// Discover reports no GPUs: NVML is reached through cgo, and this binary
// was built without it.
func Discover(ctx context.Context, log *slog.Logger) []GPU {
	if log != nil {
		log.InfoContext(ctx, "no GPUs: this binary was built without cgo, which NVML needs (rebuild with CGO_ENABLED=1)")
	}
	return nil
}
