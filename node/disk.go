package node

import (
	"fmt"
	"path/filepath"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/diskroom"
)

// openDisk readies the data dir's disk before the stores open (the room a
// provider lends its jobs: node/diskroom). A crash leaves the disks of the
// leases it cut short mounted, with what their jobs wrote, and no lease
// outlives a restart (provider.Resume ends them all): they are unmounted
// and removed first, so that the stores find the room they held. Then, on
// a disk still full, the room gives up its spare, so that the stores can
// open and the node come up, taking no work and saying why, rather than
// die of SIGBUS inside Badger's mapped log, as it would on every restart.
func (n *Node) openDisk() error {
	quotas := n.compute.DiskQuotas()
	if n.compute.Disks() != nil {
		leases := filepath.Join(n.cfg.DataDir, "leases")
		if err := exec.SweepDisks(leases, func(string) bool { return false }); err != nil {
			n.log.Warn("remove the job disks a stop left", "err", err)
		}
	}
	room, err := diskroom.Open(diskroom.Options{
		Dir:        n.cfg.DataDir,
		Reserve:    n.cfg.DiskReserve,
		NoJobs:     !n.compute.Offers(),
		MaxJobDisk: n.cfg.MaxJobDisk,
		NoQuotas:   quotas,
		Unbounded:  n.cfg.UnboundedDisk,
		Free:       n.cfg.DebugDiskFree,
		Changed: func() {
			// Before the loops are wired (Start, here) no offer is out.
			if n.offer != nil {
				n.signalOfferChanged()
			}
		},
		Log: n.log,
	})
	if err != nil {
		return fmt.Errorf("data dir %s: %w", n.cfg.DataDir, err)
	}
	n.disk = room
	st := room.Start()
	switch {
	case quotas != nil && n.cfg.UnboundedDisk:
		n.log.Warn("jobs' disk use is not bounded on this node (request.disk is not enforced), as --unbounded-disk allows", "err", quotas)
	case quotas != nil:
		n.log.Warn("a job's disk cannot be bounded on this node: it takes no job (e31d --unbounded-disk takes them unbounded)", "err", quotas)
	}
	n.log.Info("data dir's disk", "free", diskSize(st.Free), "reserve", diskSize(st.Reserve), "max_job_disk", diskSize(st.Cap))
	return nil
}

func diskSize(b uint64) string { return market.Size(b).String() }
