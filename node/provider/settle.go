package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The receipts and settlement of one lease: an interim receipt every
// interval while compute is held, both sides signing, and, after release,
// the final receipt and the output's hand-over, retried for the retention
// window when the submitter is away.

// Backoff between tries to reach an absent submitter.
const (
	firstRetry     = 500 * time.Millisecond
	maxRetryOutput = 10 * time.Second // while the GPUs may still be held
	maxRetrySettle = time.Minute      // after release, for the retention window
)

// retry calls fn until it succeeds, ctx ends, or the next try would start
// after deadline; the wait between tries doubles from first up to most.
// It returns fn's last error.
func retry(ctx context.Context, first, most time.Duration, deadline time.Time, fn func() error) error {
	wait := first
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, most)
	}
}

// settle finishes what release leaves when the submitter is away: handing
// over the output and the final receipt. It retries, with backoff, for the
// retention window; past it the output is unpinned and the lease closed
// without a countersigned final receipt (its interim receipts stand).
func (lr *leaseRunner) settle() {
	rec := lr.snapshot()
	id := rec.ID()
	defer lr.onSettled(id)
	until := rec.End.Add(lr.cfg.Retention)
	task := taskOf(rec.Lease.Terms.Job) != ""
	tries := 0
	err := retry(lr.ctx, firstRetry, maxRetrySettle, until, func() error {
		// A task's submitter announces its release on the final receipt;
		// one that did not take it at the first try may be gone, and the
		// release goes out from here.
		if r := lr.snapshot(); !r.ReleaseAnnounced && (!task || tries > 0) {
			lr.announceRelease(r.release())
		}
		tries++
		err := lr.deliverOutput(lr.ctx, 0)
		if err == nil {
			if err = lr.exchangeReceipt(lr.ctx, true); errors.Is(err, errFinalDone) {
				err = nil
			}
		}
		if err == nil && task {
			lr.change(func(r *Record) { r.ReleaseAnnounced = true })
		}
		if err != nil {
			// The submitter cannot countersign now: this side's own
			// record of the lease is stored at once, and the receipt both
			// sign supersedes it when the submitter is back.
			lr.recordOneSided()
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

// recordOneSided stores, once, this side's final record of a released
// lease, signed by the provider alone and carrying the countersigned lease
// as evidence.
func (lr *leaseRunner) recordOneSided() {
	lr.receipts.Lock()
	defer lr.receipts.Unlock()
	rec := lr.snapshot()
	if rec.OneSided || rec.FinalSigned || rec.State != Released {
		return
	}
	terms, err := json.Marshal(rec.Lease.Terms)
	if err != nil {
		lr.log.Error("one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	end := bounded(latest(rec.End, rec.LastAlive), rec.heldUntilMost())
	rec.End = end
	r := ledger.Receipt{
		Lease: rec.ID(), Job: rec.Lease.Terms.Job, Provider: lr.d.Self, Submitter: lr.submitter,
		GPUs: len(rec.Lease.Terms.GPUs), GPUModel: lr.gpuModel(),
		CPUs: rec.Lease.Terms.CPUs, MemoryBytes: rec.Lease.Terms.MemoryBytes, DiskBytes: rec.Declaration.Request.DiskBytes(),
		Seq: rec.Seq, Prev: rec.Prev, Final: true,
		HeldFrom: rec.Start, HeldUntil: end, Phase: rec.State.phase(),
		Outcome: rec.Outcome, Attribution: rec.Attribution, ExitCode: rec.ExitCode, Reason: rec.Reason,
		Output: rec.Output, Checkpoint: rec.Checkpoint, Phases: rec.phases(),
		GPUsSeen: rec.GPUsSeen, Relay: relayOf(rec), CheckpointAt: rec.keptUpTo(),
		Signer:   ledger.SignerProvider,
		Evidence: &ledger.LeaseEvidence{Terms: terms, ProviderSig: rec.Lease.ProviderSig, SubmitterSig: rec.Lease.SubmitterSig},
	}
	if err := r.SignOneSided(lr.d.Key); err != nil {
		lr.log.Error("sign one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	if _, err := lr.d.Ledger.AppendOneSided(lr.hard, r); err != nil {
		lr.log.Error("store one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	lr.log.Info("submitter away: stored this side's own record of the lease", "lease", rec.ID())
	lr.change(func(r *Record) { r.OneSided = true })
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

// errWithheld says a receipt was not offered: the provider misbehaves on
// purpose (Deps.Misbehave).
var errWithheld = errors.New("receipt withheld")

// errFinalDone says the final receipt was already exchanged.
var errFinalDone = errors.New("final receipt already signed")

// interimReceipts signs a receipt every interval while compute is held. A
// submitter that refuses maxRefusedReceipts of them in a row has the lease
// stopped and is struck off (strikes.go): the run would go on unpaid.
func (lr *leaseRunner) interimReceipts(ctx context.Context) {
	t := time.NewTicker(lr.cfg.ReceiptInterval)
	defer t.Stop()
	refused := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-lr.receiptNow:
		case <-t.C:
		}
		now := time.Now()
		lr.change(func(r *Record) { r.LastAlive = now })
		err := lr.exchangeReceipt(ctx, false)
		switch {
		case err == nil:
			refused = 0
			continue
		case refusedReceipt(ctx, err):
			refused++
		}
		lr.log.Warn("interim receipt", "lease", lr.snapshot().ID(), "err", err, "refused in a row", refused)
		if refused == maxRefusedReceipts {
			t, cancel := lr.stopper()
			lr.strikes.strike(lr.submitter, fmt.Sprintf("refused or left unanswered %d receipts of lease %s in a row", refused, t.ID))
			if cancel != nil {
				cancel(ErrReceiptsRefused)
			}
			return
		}
	}
}

// refusedReceipt reports whether a receipt exchange failed on the
// submitter's word: it answered with a refusal, or took the stream and
// never answered. One that could not be reached is away, not refusing.
func refusedReceipt(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errWithheld) || p2p.Unreachable(err) {
		return false
	}
	var re *p2p.RemoteError
	return errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded)
}

// exchangeReceipt signs the next receipt, has the submitter countersign it
// and stores it.
func (lr *leaseRunner) exchangeReceipt(ctx context.Context, final bool) error {
	if lr.d.Misbehave != nil && !lr.d.Misbehave.Receipts() {
		return errWithheld
	}
	// Receipts of a lease go one at a time (each links to the last), but
	// the lease's state lock is not held while the submitter answers: a
	// submitter that is slow or gone must not stall the run.
	lr.receipts.Lock()
	defer lr.receipts.Unlock()
	rec := lr.snapshot()
	if rec.FinalSigned {
		return errFinalDone
	}
	now := time.Now()
	if final {
		// Never before a receipt already signed: after a crash the end
		// may have been estimated short of the last interim receipt.
		now = latest(rec.End, rec.LastAlive)
	}
	now = bounded(now, rec.heldUntilMost())
	r := ledger.Receipt{
		Lease:     rec.ID(),
		Job:       rec.Lease.Terms.Job,
		Provider:  lr.d.Self,
		Submitter: lr.submitter,
		GPUs:      len(rec.Lease.Terms.GPUs),
		Seq:       rec.Seq,
		Final:     final,
		HeldFrom:  rec.Start,
		HeldUntil: now,
		Phase:     rec.State.phase(),
		Prev:      rec.Prev,
		GPUModel:  lr.gpuModel(),
		// What else the lease holds, signed, so that a job without GPUs
		// is on record for what it held.
		CPUs:        rec.Lease.Terms.CPUs,
		MemoryBytes: rec.Lease.Terms.MemoryBytes,
		DiskBytes:   rec.Declaration.Request.DiskBytes(),
	}
	if final {
		rec.End = now
		r.Outcome, r.Attribution, r.ExitCode, r.Reason = rec.Outcome, rec.Attribution, rec.ExitCode, rec.Reason
		r.Output, r.Checkpoint = rec.Output, rec.Checkpoint
		r.Phases = rec.phases()
		r.GPUsSeen, r.Relay, r.CheckpointAt = rec.GPUsSeen, relayOf(rec), rec.keptUpTo()
		if !rec.OutputAcked.IsZero() && !rec.OutputStart.IsZero() {
			r.OutputWait = rec.OutputAcked.Sub(rec.OutputStart).Seconds()
		}
	}
	if err := r.SignProvider(lr.d.Key); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, lr.cfg.ReceiptTimeout)
	defer cancel()
	var rep wire.ReceiptReply
	if err := lr.d.Calls.Call(cctx, lr.submitter, wire.ProtoReceipt, wire.ReceiptRequest{Receipt: raw, Steps: rec.steps()}, &rep); err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			// Unanswered in time, whether on a stream the submitter
			// took or on the way to it (refusedReceipt tells which).
			return fmt.Errorf("countersign receipt %d: %w (%w)", r.Seq, err, context.DeadlineExceeded)
		}
		return fmt.Errorf("countersign receipt %d: %w", r.Seq, err)
	}
	if len(rep.Dispute) > 0 && final {
		return lr.recordDispute(ctx, r, rep.Dispute)
	}
	cr, err := ledger.DecodeReceipt(rep.Receipt)
	if err != nil {
		return fmt.Errorf("countersigned receipt: %w", err)
	}
	adopted := false
	if string(cr.SigningBytes()) != string(r.SigningBytes()) {
		// The submitter answered a retry with the receipt of this seq it
		// countersigned before (our earlier reply was lost): it carries our
		// own signature, so we adopt it and go on from it.
		if cr.Lease != r.Lease || cr.Seq != r.Seq || cr.Provider != lr.d.Self || cr.Verify() != nil {
			return errors.New("the submitter countersigned a different receipt")
		}
		adopted = true
	}
	// Stored whatever happens to ctx now: the submitter has countersigned
	// and stored it, and the chain must not go on without it here.
	if _, err := lr.d.Ledger.Append(context.WithoutCancel(ctx), cr); err != nil {
		return fmt.Errorf("store receipt: %w", err)
	}
	lr.d.Metrics.Receipts.Inc()
	if err := lr.update(func(r *Record) {
		r.Seq++
		r.Prev = cr.Digest()
		r.LastAlive = latest(r.LastAlive, cr.HeldUntil)
		if cr.Final {
			r.FinalSigned = true
			r.End = latest(r.End, cr.HeldUntil)
		}
	}); err != nil {
		return err
	}
	if adopted && final && !cr.Final {
		return errors.New("adopted an earlier interim receipt; the final one follows")
	}
	return nil
}

// recordDispute stores both versions of a lease the submitter will not
// countersign: this side's final receipt and the submitter's own record.
// Nothing more is signed for the lease.
func (lr *leaseRunner) recordDispute(ctx context.Context, ours ledger.Receipt, raw json.RawMessage) error {
	theirs, err := ledger.DecodeReceipt(raw)
	if err != nil {
		return fmt.Errorf("the submitter's record: %w", err)
	}
	if err := theirs.Verify(); err != nil || theirs.Lease != ours.Lease || theirs.Signer != ledger.SignerSubmitter {
		return fmt.Errorf("the submitter's record of lease %s does not hold: %v", ours.Lease, err)
	}
	if _, err := lr.d.Ledger.RecordDispute(context.WithoutCancel(ctx), ours.Lease, ours, theirs); err != nil {
		return fmt.Errorf("record dispute: %w", err)
	}
	lr.log.Warn("the submitter disputes the final receipt; both versions recorded", "lease", ours.Lease, "its reason", theirs.Reason)
	lr.strikes.strike(lr.submitter, "disputed the final receipt of lease "+ours.Lease)
	return lr.update(func(r *Record) { r.FinalSigned = true })
}

// relayOf is the relay the record names, for its final receipt; "" for
// none, or for one that no longer decodes.
func relayOf(rec Record) peer.ID {
	p, err := peer.Decode(rec.Relay)
	if err != nil {
		return ""
	}
	return p
}
