package provider

import (
	"errors"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
)

// The settlement of one lease: after release, the final receipt
// (receipts.go) and the output's hand-over, retried for the retention
// window when the submitter is away.

// Backoff between tries to reach an absent submitter.
const (
	firstRetry     = 500 * time.Millisecond
	maxRetryOutput = 10 * time.Second // while the GPUs may still be held
	maxRetrySettle = time.Minute      // after release, for the retention window
)

// settle finishes what release leaves when the submitter is away: handing
// over the output and the final receipt. It retries, with backoff, for the
// retention window; past it the output is unpinned and the lease closed
// without a countersigned final receipt (its interim receipts stand).
func (lr *leaseRunner) settle() {
	rec := lr.snapshot()
	id := rec.ID()
	defer lr.onSettled(id)
	until := rec.End.Add(lr.cfg.Retention)
	ofTask := taskOf(rec.Lease.Terms.Job) != ""
	tries := 0
	err := task.Retry(lr.ctx, task.Backoff{First: firstRetry, Most: maxRetrySettle}, until, func() error {
		// A task's submitter announces its release on the final receipt;
		// one that did not take it at the first try may be gone, and the
		// release goes out from here.
		if r := lr.snapshot(); !r.ReleaseAnnounced && (!ofTask || tries > 0) {
			lr.announceRelease(r.release())
		}
		tries++
		err := lr.deliverOutput(lr.ctx, 0)
		if err == nil {
			if err = lr.receipts.exchange(lr.ctx, true); errors.Is(err, errFinalDone) {
				err = nil
			}
		}
		if err == nil && ofTask {
			lr.change(func(r *Record) { r.ReleaseAnnounced = true })
		}
		if err != nil {
			// The submitter cannot countersign now: this side's own
			// record of the lease is stored at once, and the receipt both
			// sign supersedes it when the submitter is back.
			lr.receipts.oneSided()
		}
		if tries == 1 {
			// Signed by both, or recorded one-sided: a stop need not wait
			// for the retries.
			lr.onSettled(id)
		}
		return err
	})
	switch {
	case err == nil:
		lr.log.Info("lease settled", "lease", id)
	case lr.ctx.Err() != nil:
		// Stopping: the next start settles it (Recover).
	default:
		lr.log.Warn("submitter never came back: giving up the lease's output", "lease", id, "err", err)
		if c, cerr := cid.Decode(rec.Output); cerr == nil {
			if err := lr.d.Store.Unpin(lr.hard, c, pinOutput(id)); err != nil {
				lr.log.Warn("unpin output", "lease", id, "err", err)
			}
		}
		lr.change(func(r *Record) {
			r.FinalSigned = true // nothing more can be signed
			r.Reason = "submitter did not return within the retention window"
		})
	}
}

// announceRelease publishes a lease's release and records that it did;
// settle tries again for a release that could not be published.
func (lr *leaseRunner) announceRelease(body wire.ReleaseBody) {
	if _, err := lr.d.Gossip.Publish(lr.ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		lr.log.Warn("announce release", "lease", body.Lease, "err", err)
		return
	}
	lr.change(func(r *Record) { r.ReleaseAnnounced = true })
}
