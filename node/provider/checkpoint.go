package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/wire"
)

// checkpointLoop imports the checkpoint folder every interval while the job
// runs, and announces each new one to the submitter. A capture of a folder
// that was changing is tried again shortly (ckptfolder.go).
func (lr *leaseRunner) checkpointLoop(ctx context.Context, dir string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	mode, retrying, readInVain := captureSettled, false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if retrying {
				// A whole interval went by without the folder settling.
				mode = captureSteady
			}
		case <-retry.C:
		}
		err := lr.takeCheckpoint(ctx, dir, mode)
		if errors.Is(err, errChangedWhileRead) {
			readInVain++
		}
		if errors.Is(err, errUnsettled) {
			retrying = true
			retry.Reset(retryAfter(readInVain, every))
			continue
		}
		retry.Stop()
		mode, retrying, readInVain = captureSettled, false, 0
	}
}

// takeCheckpoint imports dir if it holds something new, pins it and hands
// it to the submitter, who pulls it at once. It returns errUnsettled, and
// keeps nothing, when mode asks for a folder that was not changing and it
// was; other failures are logged, and the next capture tries again.
func (lr *leaseRunner) takeCheckpoint(ctx context.Context, dir string, mode captureMode) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return nil
	}
	rec := lr.snapshot()
	id, job := rec.ID(), rec.Lease.Terms.Job
	var before folderState
	if mode != captureFinal {
		if before, err = readFolderState(dir); err != nil {
			return fmt.Errorf("%w: %w", errUnsettled, err)
		}
		// A time to come was set by hand (an unpacked archive, say), not
		// by a write going on now.
		if d := time.Since(before.newest); mode == captureSettled && d >= 0 && d < checkpointSettle {
			return errUnsettled
		}
	}
	num := rec.CheckpointN + 1
	c, _, err := lr.d.Store.Import(ctx, dir, content.ImportOptions{Pin: pinCheckpoint(id, num), SkipUnsupported: true,
		Limits: outputLimits(lr.cfg.Limits, rec.Declaration.Request.DiskBytes())})
	if errors.Is(err, content.ErrTooLarge) {
		// Over a cap, it would be every time: the job goes on, and the
		// last checkpoint taken stays the one to resume from.
		lr.log.Warn("checkpoint left out", "lease", id, "err", namedCap(err))
		return nil
	}
	if errors.Is(err, content.ErrNoRoom) {
		// The disk's room is promised to jobs' disks and kept in
		// reserve: the job goes on, and the next capture tries again.
		lr.log.Warn("checkpoint left out: no room on the data dir's disk", "lease", id, "err", err)
		return nil
	}
	if err != nil {
		if mode != captureFinal && before.changed(dir) {
			return fmt.Errorf("%w: %w", errChangedWhileRead, err) // a file went while it was read
		}
		lr.log.Warn("import checkpoint", "lease", id, "err", err)
		return nil
	}
	if mode != captureFinal && before.changed(dir) {
		if err := lr.d.Store.Unpin(ctx, c, pinCheckpoint(id, num)); err != nil {
			lr.log.Warn("unpin checkpoint taken while it changed", "lease", id, "err", err)
		}
		lr.log.Debug("checkpoint folder changed while it was taken; trying again", "lease", id)
		return errChangedWhileRead
	}
	if c.String() == rec.Checkpoint {
		if err := lr.d.Store.Unpin(ctx, c, pinCheckpoint(id, num)); err != nil {
			lr.log.Warn("unpin unchanged checkpoint", "lease", id, "err", err)
		}
		return nil
	}
	lr.d.Access.Allow(lr.submitter, c)
	taken := time.Now()
	lr.change(func(r *Record) { r.Checkpoint, r.CheckpointN, r.CheckpointAt = c.String(), num, taken })
	// The event says when the checkpoint was taken: the time a preempted
	// lease's final receipt names (checkpoint_at), which the submitter
	// checks against it.
	lr.sendEvent(wire.EventRequest{Lease: id, Job: job, Checkpoint: c.String(), N: num, At: taken.UnixMilli()})
	return nil
}
