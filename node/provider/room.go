package provider

import (
	"log/slog"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/diskroom"
)

// A job's disk is granted out of the data dir's free space when its lease
// is proposed (Deps.Room, node/diskroom): a proposal the room has no space
// for is not made, and what a proposal holds goes back when it comes to
// nothing. Once the lease is signed, its grant follows it: its inputs are
// no longer promised once staged, its output once imported, and the rest
// once its disk is removed. What settled leases keep only for retention
// goes early while the disk is short (retention.watchDisk).

// diskGrants are the grants of the data dir's disk to jobs, as the role
// and each runner tell the room of them. Immutable; the room has its own
// lock.
type diskGrants struct {
	// room grants the disks; nil where none is kept, and then maxJobDisk
	// alone bounds a job's request.disk (0: no bound).
	room       Room
	maxJobDisk uint64
	log        *slog.Logger
}

// needOf is what a job may take of the data dir's disk: its request.disk,
// its output, and its inputs and image as its submitter measured them.
func needOf(d market.Declaration) diskroom.Need {
	inputs := uint64(d.Work.ImageSize)
	for _, in := range d.Data {
		inputs += uint64(in.Size)
	}
	return diskroom.NeedOf(d.Request.DiskBytes(), inputs)
}

// hold holds the disk of a job about to be proposed, and reports whether
// it could.
func (g diskGrants) hold(job string, d market.Declaration) bool {
	if g.room == nil {
		return g.maxJobDisk == 0 || d.Request.DiskBytes() <= g.maxJobDisk
	}
	if err := g.room.Hold(job, needOf(d)); err != nil {
		// Every pass whose view still has the old offer says so again.
		g.log.Debug("no proposal: no room for the job's disk", "job", job, "err", err)
		return false
	}
	return true
}

// drop gives back what a proposal that came to nothing held.
func (g diskGrants) drop(job string) {
	if g.room != nil {
		g.room.Drop(job)
	}
}

// signed moves a proposal's grant to its signed lease, whose disk will be
// under dir.
func (g diskGrants) signed(job, lease, dir string) {
	if g.room != nil {
		g.room.Signed(job, lease, exec.DiskImage(dir))
	}
}

// staged, imported and released tell the room how far the lease got.
func (g diskGrants) staged(lease string) {
	if g.room != nil {
		g.room.Staged(lease)
	}
}

func (g diskGrants) imported(lease string) {
	if g.room != nil {
		g.room.Imported(lease)
	}
}

func (g diskGrants) released(lease string) {
	if g.room != nil {
		g.room.Release(lease)
	}
}

// offered is what the offer says of the disk: the largest request.disk
// this node can grant now, and why it lends none, if it does not.
func (g diskGrants) offered() (maxJobDisk uint64, noDisk string) {
	if g.room == nil {
		return g.maxJobDisk, ""
	}
	return g.room.Offered()
}
