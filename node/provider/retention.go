package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
)

// retentionSweepEvery is how often the provider looks for settled leases
// past the retention window.
const retentionSweepEvery = time.Hour

// retention releases what settled leases keep (their output, checkpoints,
// inputs and image, and their record) once the retention window after
// their release has passed, or early, for room on the disk.
type retention struct {
	*env // immutable, shared with the role
	// inputs are the role's layouts, swept of what a GC left unpinned;
	// immutable, with a lock of their own.
	inputs *layouts
	// sweeping is set while a sweep for room on the disk runs
	// (watchDisk), so that a short disk starts one at a time.
	sweeping atomic.Bool
}

// loop releases, every retentionSweepEvery, what settled leases
// keep pinned once the retention window after their release has passed.
func (r *retention) loop(ctx context.Context) {
	task.NowAndEvery(ctx, retentionSweepEvery, func(now time.Time) {
		if n, err := r.sweep(ctx, now, false); err != nil && ctx.Err() == nil {
			r.log.Warn("retention sweep", "err", err)
		} else if n > 0 {
			r.log.Info("retention: released the content of settled leases", "leases", n)
		}
	})
}

// sweep unpins the output, checkpoints, inputs and image of every
// lease released and settled more than Retention ago, forgets its record,
// and collects the blocks nothing else holds. The ledger keeps the lease's
// receipts, and with them the CIDs of its output and last checkpoint. It
// returns how many leases it released. With early, every settled lease
// whose output its submitter has fetched goes, however recent: the disk
// has no room for new work (watchDisk), and what a submitter has fetched,
// checked and signed for is kept only as a courtesy, which yields to the
// jobs to come.
func (r *retention) sweep(ctx context.Context, now time.Time, early bool) (int, error) {
	var expired []Record
	err := r.d.Records.Each(state.PrefixLease, func(b []byte) error {
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			r.log.Warn("retention: unreadable lease record left as it is", "err", err)
			return nil
		}
		// Early, only what the submitter already holds: its output
		// fetched and checked (or none to fetch).
		kept := rec.Output == "" || !rec.OutputAcked.IsZero()
		if rec.State == Released && rec.FinalSigned && !rec.End.IsZero() && (early && kept || now.Sub(rec.End) > r.cfg.Retention) {
			expired = append(expired, rec)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(expired) == 0 {
		return 0, nil
	}
	// Every pin a lease holds names the lease: its inputs, image, output and
	// each checkpoint it took.
	pins, err := r.d.Store.Pins(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	done := 0
	for _, rec := range expired {
		suffix := " of lease " + rec.ID()
		for _, pin := range pins {
			for _, reason := range pin.Reasons {
				if !strings.HasSuffix(reason, suffix) {
					continue
				}
				if err := r.d.Store.Unpin(ctx, pin.Root, reason); err != nil && !errors.Is(err, content.ErrNotFound) {
					errs = append(errs, err)
				}
			}
		}
		if err := r.d.Records.Delete(state.PrefixLease, rec.ID()); err != nil {
			errs = append(errs, err)
			continue
		}
		done++
	}
	if done > 0 {
		if _, err := r.d.Store.GC(ctx); err != nil {
			errs = append(errs, err)
		}
		if pinned, err := pinnedRoots(ctx, r.d.Store); err != nil {
			errs = append(errs, err)
		} else if err := r.inputs.sweepLaidOut(pinned, false); err != nil {
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// watchDisk measures the disk until the provider stops; while it is
// short, the content that settled leases keep only for retention goes
// first.
func (r *retention) watchDisk() {
	if r.d.Room == nil {
		return
	}
	r.d.Room.Watch(r.ctx, func() {
		if !r.sweeping.CompareAndSwap(false, true) {
			return
		}
		if !r.tasks.Go(func() {
			defer r.sweeping.Store(false)
			n, err := r.sweep(r.ctx, time.Now(), true)
			if err != nil && r.ctx.Err() == nil {
				r.log.Warn("retention sweep for room on the disk", "err", err)
			} else if n > 0 {
				r.log.Info("no room on the disk: released early the content of settled leases", "leases", n)
			}
		}) {
			r.sweeping.Store(false)
		}
	})
}
