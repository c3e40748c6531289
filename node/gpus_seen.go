package node

import (
	"context"

	"github.com/e31network/e31/exec"
)

// providerSeeGPUs is how the provider checks, before each run, which GPUs
// the machine has: the driver asked again for real GPUs, so that a final
// receipt names what the run had rather than what the node found at start;
// nil (the list found at start) for simulated ones, which report their
// simulated UUIDs and models.
func providerSeeGPUs(n *Node) func(context.Context) []exec.GPU {
	switch {
	case n.cfg.testSeeGPUs != nil:
		return n.cfg.testSeeGPUs
	case n.cfg.SimGPUs != "" || n.cfg.DiscoverGPUs == nil:
		return nil
	}
	return func(ctx context.Context) []exec.GPU { return n.cfg.DiscoverGPUs(ctx, n.log) }
}
