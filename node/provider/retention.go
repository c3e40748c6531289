package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/state"
)

// retentionSweepEvery is how often the provider looks for settled leases
// past the retention window.
const retentionSweepEvery = time.Hour

// retentionLoop releases, every retentionSweepEvery, what settled leases
// keep pinned once the retention window after their release has passed.
func (p *Provider) retentionLoop(ctx context.Context) {
	t := time.NewTicker(retentionSweepEvery)
	defer t.Stop()
	for {
		if n, err := p.sweepRetention(ctx, time.Now(), false); err != nil && ctx.Err() == nil {
			p.log.Warn("retention sweep", "err", err)
		} else if n > 0 {
			p.log.Info("retention: released the content of settled leases", "leases", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepRetention unpins the output, checkpoints, inputs and image of every
// lease released and settled more than Retention ago, forgets its record,
// and collects the blocks nothing else holds. The ledger keeps the lease's
// receipts, and with them the CIDs of its output and last checkpoint. It
// returns how many leases it released. With early, every settled lease
// whose output its submitter has fetched goes, however recent: the disk
// has no room for new work (room.go), and what a submitter has fetched,
// checked and signed for is kept only as a courtesy, which yields to the
// jobs to come.
func (p *Provider) sweepRetention(ctx context.Context, now time.Time, early bool) (int, error) {
	var expired []Record
	err := p.d.Records.Each(state.PrefixLease, func(b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			p.log.Warn("retention: unreadable lease record left as it is", "err", err)
			return nil
		}
		// Early, only what the submitter already holds: its output
		// fetched and checked (or none to fetch).
		kept := r.Output == "" || !r.OutputAcked.IsZero()
		if r.State == Released && r.FinalSigned && !r.End.IsZero() && (early && kept || now.Sub(r.End) > p.cfg.Retention) {
			expired = append(expired, r)
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
	pins, err := p.d.Store.Pins(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	done := 0
	for _, r := range expired {
		suffix := " of lease " + r.ID()
		for _, pin := range pins {
			for _, reason := range pin.Reasons {
				if !strings.HasSuffix(reason, suffix) {
					continue
				}
				if err := p.d.Store.Unpin(ctx, pin.Root, reason); err != nil && !errors.Is(err, content.ErrNotFound) {
					errs = append(errs, err)
				}
			}
		}
		if err := p.d.Records.Delete(state.PrefixLease, r.ID()); err != nil {
			errs = append(errs, err)
			continue
		}
		done++
	}
	if done > 0 {
		if _, err := p.d.Store.GC(ctx); err != nil {
			errs = append(errs, err)
		}
		if pinned, err := pinnedRoots(ctx, p.d.Store); err != nil {
			errs = append(errs, err)
		} else if err := p.inputs.sweepLaidOut(pinned, false); err != nil {
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}
