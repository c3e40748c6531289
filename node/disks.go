package node

import (
	"context"
	"path/filepath"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/provider"
)

// jobDisks makes the filesystems that bound what each job writes
// (provider.Disks), with exec, each a copy of a formatted template.
type jobDisks struct{ maker exec.DiskMaker }

func (d jobDisks) Mount(ctx context.Context, dir string, bytes uint64) (exec.Disk, error) {
	return d.maker.Mount(ctx, dir, bytes)
}
func (jobDisks) Remove(dir string) error { return exec.RemoveDisk(dir) }
func (jobDisks) Sweep(root string, keep func(id string) bool) error {
	return exec.SweepDisks(root, keep)
}

// providerDisks is nil, with a warning, where a job's writes cannot be
// bounded, and on nodes whose runner is a stand-in for tests.
func providerDisks(n *Node) provider.Disks {
	if _, real := n.runner.(*exec.Runner); !real {
		return nil
	}
	if err := exec.DiskSupport(); err != nil {
		n.log.Warn("jobs' disk use is not bounded on this node (request.disk is not enforced)", "err", err)
		return nil
	}
	return jobDisks{maker: exec.DiskMaker{Templates: filepath.Join(n.cfg.DataDir, "disk-templates")}}
}
