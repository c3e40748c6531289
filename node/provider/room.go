package provider

import (
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/diskroom"
)

// A job's disk is granted out of the data dir's free space when its lease
// is proposed (Deps.Room, node/diskroom): a proposal the room has no space
// for is not made, and what a proposal holds goes back when it comes to
// nothing. Once the lease is signed, its grant follows it: its inputs are
// no longer promised once staged, its output once imported, and the rest
// once its disk is removed.

// needOf is what a job may take of the data dir's disk: its request.disk,
// its output, and its inputs and image as its submitter measured them.
func needOf(d market.Declaration) diskroom.Need {
	inputs := uint64(d.Work.ImageSize)
	for _, in := range d.Data {
		inputs += uint64(in.Size)
	}
	return diskroom.NeedOf(d.Request.DiskBytes(), inputs)
}

// holdDisk holds the disk of a job about to be proposed, and reports
// whether it could.
func (p *Provider) holdDisk(job string, d market.Declaration) bool {
	if p.d.Room == nil {
		return p.cfg.MaxJobDisk == 0 || d.Request.DiskBytes() <= p.cfg.MaxJobDisk
	}
	if err := p.d.Room.Hold(job, needOf(d)); err != nil {
		// Every pass whose view still has the old offer says so again.
		p.log.Debug("no proposal: no room for the job's disk", "job", job, "err", err)
		return false
	}
	return true
}

// dropDisk gives back what a proposal that came to nothing held.
func (p *Provider) dropDisk(job string) {
	if p.d.Room != nil {
		p.d.Room.Drop(job)
	}
}

// diskSigned moves a proposal's grant to its signed lease, whose disk
// will be under dir.
func (p *Provider) diskSigned(job, lease, dir string) {
	if p.d.Room != nil {
		p.d.Room.Signed(job, lease, exec.DiskImage(dir))
	}
}

// staged, imported and released tell the room how far the lease got.
func (lr *leaseRunner) diskStaged() {
	if lr.d.Room != nil {
		lr.d.Room.Staged(lr.snapshot().ID())
	}
}

func (lr *leaseRunner) diskImported() {
	if lr.d.Room != nil {
		lr.d.Room.Imported(lr.snapshot().ID())
	}
}

func (lr *leaseRunner) diskReleased(id string) {
	if lr.d.Room != nil {
		lr.d.Room.Release(id)
	}
}

// Disk is what the offer says of the disk: the largest request.disk this
// node can grant now, and why it lends none, if it does not.
func (p *Provider) Disk() (maxJobDisk uint64, noDisk string) {
	if p.d.Room == nil {
		return p.cfg.MaxJobDisk, ""
	}
	return p.d.Room.Offered()
}

// TakesCPUJobs reports whether this node takes jobs that ask for no GPU:
// the offer says so.
func (p *Provider) TakesCPUJobs() bool { return !p.cfg.NoCPUJobs }

// watchDisk measures the disk until ctx ends; while it is short, the
// content that settled leases keep only for retention goes first.
func (p *Provider) watchDisk() {
	if p.d.Room == nil {
		return
	}
	p.d.Room.Watch(p.ctx, func() {
		if !p.sweeping.CompareAndSwap(false, true) {
			return
		}
		if !p.tasks.Go(func() {
			defer p.sweeping.Store(false)
			n, err := p.sweepRetention(p.ctx, time.Now(), true)
			if err != nil && p.ctx.Err() == nil {
				p.log.Warn("retention sweep for room on the disk", "err", err)
			} else if n > 0 {
				p.log.Info("no room on the disk: released early the content of settled leases", "leases", n)
			}
		}) {
			p.sweeping.Store(false)
		}
	})
}
