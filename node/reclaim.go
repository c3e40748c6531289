package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/compute"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reclaim"
)

// GPUUse reads who uses the machine's GPUs (exec/nvidia.UseReader), for
// --reclaim-on-use.
type GPUUse interface {
	reclaim.Source
	Close() error
}

// SimGPUUse is the folder under the data dir where a GPU of --sim-gpus is
// marked in use by someone who is not a job: a file named by its index
// (touch DATA/sim-gpu-use/0), as a test or a person playing the owner
// does.
const SimGPUUse = "sim-gpu-use"

// reclaimer builds the reclaim watcher of --reclaim-on-use, of cfg's
// node with machine m and provider p, and what to close once it has
// stopped; nil when the node does not watch.
func reclaimer(ctx context.Context, cfg Config, m *compute.Machine, p *provider.Provider, log *slog.Logger) (*reclaim.Watcher, func(), error) {
	if !cfg.ReclaimOnUse || !m.Offers() {
		return nil, nil, nil
	}
	var src reclaim.Source
	closeSrc := func() {}
	switch {
	case cfg.SimGPUs != "":
		sim, err := exec.NewSimUse(filepath.Join(cfg.DataDir, SimGPUUse), m.GPUs)
		if err != nil {
			return nil, nil, fmt.Errorf("--reclaim-on-use: %w", err)
		}
		src = sim
	case cfg.OpenGPUUse != nil:
		use := cfg.OpenGPUUse(ctx, log)
		src, closeSrc = use, func() { _ = use.Close() }
	default:
		return nil, nil, fmt.Errorf("--reclaim-on-use: this build cannot read the GPUs' use")
	}
	w, err := reclaim.New(reclaim.Options{
		Source: src, Provider: p, Leased: p.HeldGPUs, IdleFor: cfg.ReclaimIdle,
		Log: log.With("part", "reclaim"),
	})
	if err != nil {
		closeSrc()
		return nil, nil, fmt.Errorf("--reclaim-on-use: %w", err)
	}
	return w, closeSrc, nil
}
