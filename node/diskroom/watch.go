package diskroom

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"golang.org/x/sys/unix"
)

// The spare: blocks held in a file of the data dir, given up when the
// disk fills so that the node's own records can still be written.
const (
	spareName = "disk-spare"
	spareMax  = 64 << 20
)

// Timings of Watch.
const (
	// watchEvery is how often the disk is measured: a second is about
	// what a disk written at full speed needs to lose a spare's worth.
	watchEvery = time.Second
	// shortEvery bounds how often short is called while the disk stays
	// short: a call that finds nothing to free costs a read of the
	// lease records, and one that frees something a content store's
	// collection.
	shortEvery = 5 * time.Second
)

// Start is what a daemon does with its disk before it opens its stores:
// on a disk with less free than the spare, it gives the spare up, so that
// the stores have room to open and settle; and it says in the log when
// the disk is under its reserve, where the node will take no work. It
// returns how the disk stands.
func (r *Room) Start() Status {
	st := r.Refresh()
	if r.o.Free == 0 && st.Free < r.spareLen {
		r.giveUpSpare("at start")
		st = r.Refresh()
	}
	if st.NoDisk != "" {
		r.logChange(st)
	}
	return st
}

// Watch measures the disk every second until ctx ends: it gives up the
// spare when the disk has less free than the spare's size, makes it again
// once the disk has its reserve and the spare's room, and calls short (at
// most every half minute) while the disk cannot lend what its largest
// job, or the default one, would take.
func (r *Room) Watch(ctx context.Context, short func()) {
	var lastShort time.Time
	task.NowAndEvery(ctx, watchEvery, func(time.Time) {
		st := r.Refresh()
		if r.o.Free == 0 {
			switch {
			case st.Free < r.spareLen:
				r.giveUpSpare("")
			case st.Free >= satAdd(r.reserve, 2*r.spareLen):
				r.makeSpare()
			}
		}
		if short != nil && r.short(st) && time.Since(lastShort) >= shortEvery {
			lastShort = time.Now()
			short()
		}
	})
}

// short reports whether the disk cannot lend a job of the largest size
// this node takes, or of the default size if that is smaller.
func (r *Room) short(st Status) bool {
	if st.NoDisk == market.DiskUnbounded {
		return false
	}
	return st.NoDisk != "" || st.Lendable < NeedOf(min(r.cap, defaultDisk), 0).Total()
}

// giveUpSpare deletes the spare, if there is one, and says so.
func (r *Room) giveUpSpare(when string) {
	err := os.Remove(r.spare)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		r.log.Error("give up the spare room on the data dir's disk", "err", err)
		return
	}
	msg := "the data dir's disk is full: gave up the spare room kept for the node's own records"
	if when != "" {
		msg += " " + when
	}
	r.log.Error(msg, "spare", size(r.spareLen))
}

// makeSpare makes the spare if there is none: a file whose blocks are
// allocated, so that deleting it frees them.
func (r *Room) makeSpare() {
	if _, err := os.Stat(r.spare); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return
	}
	tmp := r.spare + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		r.log.Warn("make the spare room on the data dir's disk", "err", err)
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, int64(r.spareLen))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, r.spare)
	}
	if err != nil {
		os.Remove(tmp)
		r.log.Warn("make the spare room on the data dir's disk", "err", err)
	}
}
