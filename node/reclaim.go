package node

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/e31network/e31/exec"
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

// reclaimer builds the reclaim watcher of --reclaim-on-use and what to
// close once it has stopped; nil when the node does not watch.
func (n *Node) reclaimer(ctx context.Context) (*reclaim.Watcher, func(), error) {
	if !n.cfg.ReclaimOnUse || !n.compute.Offers() {
		return nil, nil, nil
	}
	var src reclaim.Source
	closeSrc := func() {}
	switch {
	case n.cfg.SimGPUs != "":
		sim, err := exec.NewSimUse(filepath.Join(n.cfg.DataDir, SimGPUUse), n.compute.GPUs)
		if err != nil {
			return nil, nil, fmt.Errorf("--reclaim-on-use: %w", err)
		}
		src = sim
	case n.cfg.OpenGPUUse != nil:
		use := n.cfg.OpenGPUUse(ctx, n.log)
		src, closeSrc = use, func() { _ = use.Close() }
	default:
		return nil, nil, fmt.Errorf("--reclaim-on-use: this build cannot read the GPUs' use")
	}
	w, err := reclaim.New(reclaim.Options{
		Source: src, Provider: n.provider, Leased: n.provider.HeldGPUs, IdleFor: n.cfg.ReclaimIdle,
		Log: n.log.With("part", "reclaim"),
	})
	if err != nil {
		closeSrc()
		return nil, nil, fmt.Errorf("--reclaim-on-use: %w", err)
	}
	return w, closeSrc, nil
}
