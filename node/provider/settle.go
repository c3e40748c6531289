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

// deliverOutput hands the output's CID to the submitter, who fetches and
// checks it before it answers, retrying for up to patience. With no
// patience it tries once, for at most the output timeout.
func (p *Provider) deliverOutput(ctx context.Context, l *lease, submitter peer.ID, patience time.Duration) error {
	rec := l.snapshot()
	t := rec.Lease.Terms
	if rec.Output == "" || !rec.OutputAcked.IsZero() {
		return nil
	}
	// With patience, every attempt ends by the deadline too: the GPUs are
	// held only that long. Without, one attempt may take the whole output
	// timeout, since the submitter answers only once it has the output.
	deadline := time.Now().Add(patience)
	attemptEnd := deadline
	if patience == 0 {
		attemptEnd = time.Now().Add(p.cfg.OutputTimeout)
	}
	err := retry(ctx, firstRetry, maxRetryOutput, deadline, func() error {
		cctx, cancel := context.WithDeadline(ctx, attemptEnd)
		defer cancel()
		return p.d.Calls.Call(cctx, submitter, wire.ProtoOutput, wire.OutputRequest{Lease: t.ID, Job: t.Job, Output: rec.Output, Skipped: rec.Skipped, KeptUntil: p.keptUntil(rec), Steps: rec.steps()}, nil)
	})
	if err != nil {
		return fmt.Errorf("hand output %s to the submitter: %w", rec.Output, err)
	}
	now := time.Now()
	return p.update(l, func(r *Record) { r.OutputAcked = now })
}

// keptUntil is when the provider will release a lease's content: the
// retention window after release, or after now for a lease still running.
func (p *Provider) keptUntil(rec Record) int64 {
	end := rec.End
	if end.IsZero() {
		end = time.Now()
	}
	return end.Add(p.cfg.Retention).UnixMilli()
}

// settle finishes what release leaves when the submitter is away: handing
// over the output and the final receipt. It retries, with backoff, for the
// retention window; past it the output is unpinned and the lease closed
// without a countersigned final receipt (its interim receipts stand).
func (p *Provider) settle(l *lease, submitter peer.ID) {
	rec := l.snapshot()
	id := rec.ID()
	until := rec.End.Add(p.cfg.Retention)
	err := retry(p.ctx, firstRetry, maxRetrySettle, until, func() error {
		if r := l.snapshot(); !r.ReleaseAnnounced {
			p.announceRelease(l, r.release())
		}
		err := p.deliverOutput(p.ctx, l, submitter, 0)
		if err == nil {
			if err = p.exchangeReceipt(p.ctx, l, submitter, true); errors.Is(err, errFinalDone) {
				err = nil
			}
		}
		if err != nil {
			// The submitter cannot countersign now: this side's own
			// record of the lease is stored at once, and the receipt both
			// sign supersedes it when the submitter is back.
			p.recordOneSided(l)
		}
		return err
	})
	switch {
	case err == nil:
		p.log.Info("lease settled", "lease", id)
	case p.ctx.Err() != nil:
		// Stopping: the next start settles it (Recover).
	default:
		p.log.Warn("submitter never came back: giving up the lease's output", "lease", id, "err", err)
		if c, cerr := cid.Decode(rec.Output); cerr == nil {
			if err := p.d.Store.Unpin(p.hard, c, pinOutput(id)); err != nil {
				p.log.Warn("unpin output", "lease", id, "err", err)
			}
		}
		p.change(l, func(r *Record) {
			r.FinalSigned = true // nothing more can be signed
			r.Reason = "submitter did not return within the retention window"
		})
	}
}

// recordOneSided stores, once, this side's final record of a released
// lease, signed by the provider alone and carrying the countersigned lease
// as evidence.
func (p *Provider) recordOneSided(l *lease) {
	l.receipts.Lock()
	defer l.receipts.Unlock()
	rec := l.snapshot()
	if rec.OneSided || rec.FinalSigned || rec.State != Released {
		return
	}
	terms, err := json.Marshal(rec.Lease.Terms)
	if err != nil {
		p.log.Error("one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	end := latest(rec.End, rec.LastAlive)
	rec.End = end
	sub, _ := peer.Decode(rec.Lease.Terms.Submitter)
	r := ledger.Receipt{
		Lease: rec.ID(), Job: rec.Lease.Terms.Job, Provider: p.d.Self, Submitter: sub,
		GPUs: len(rec.Lease.Terms.GPUs), GPUModel: p.gpuModel(rec.Lease.Terms.GPUs),
		Seq: rec.Seq, Prev: rec.Prev, Final: true,
		HeldFrom: rec.Start, HeldUntil: end, Phase: rec.State.phase(),
		Outcome: rec.Outcome, Attribution: rec.Attribution, ExitCode: rec.ExitCode, Reason: rec.Reason,
		Output: rec.Output, Checkpoint: rec.Checkpoint, Phases: rec.phases(),
		GPUsSeen: rec.GPUsSeen,
		Signer:   ledger.SignerProvider,
		Evidence: &ledger.LeaseEvidence{Terms: terms, ProviderSig: rec.Lease.ProviderSig, SubmitterSig: rec.Lease.SubmitterSig},
	}
	if err := r.SignOneSided(p.d.Key); err != nil {
		p.log.Error("sign one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	if _, err := p.d.Ledger.AppendOneSided(p.hard, r); err != nil {
		p.log.Error("store one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	p.log.Info("submitter away: stored this side's own record of the lease", "lease", rec.ID())
	p.change(l, func(r *Record) { r.OneSided = true })
}

// announceRelease publishes a lease's release and records that it did;
// settle tries again for a release that could not be published.
func (p *Provider) announceRelease(l *lease, body wire.ReleaseBody) {
	if _, err := p.d.Gossip.Publish(p.ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		p.log.Warn("announce release", "lease", body.Lease, "err", err)
		return
	}
	p.change(l, func(r *Record) { r.ReleaseAnnounced = true })
}

// errWithheld says a receipt was not offered: the provider misbehaves on
// purpose (Deps.Misbehave).
var errWithheld = errors.New("receipt withheld")

// errFinalDone says the final receipt was already exchanged.
var errFinalDone = errors.New("final receipt already signed")

// interimReceipts signs a receipt every interval while compute is held.
func (p *Provider) interimReceipts(ctx context.Context, l *lease, submitter peer.ID) {
	t := time.NewTicker(p.cfg.ReceiptInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.receiptNow:
		case <-t.C:
		}
		now := time.Now()
		p.change(l, func(r *Record) { r.LastAlive = now })
		if err := p.exchangeReceipt(ctx, l, submitter, false); err != nil {
			p.log.Warn("interim receipt", "lease", l.snapshot().ID(), "err", err)
		}
	}
}

// exchangeReceipt signs the next receipt, has the submitter countersign it
// and stores it.
func (p *Provider) exchangeReceipt(ctx context.Context, l *lease, submitter peer.ID, final bool) error {
	if p.d.Misbehave != nil && !p.d.Misbehave.Receipts() {
		return errWithheld
	}
	// Receipts of a lease go one at a time (each links to the last), but
	// the lease's state lock is not held while the submitter answers: a
	// submitter that is slow or gone must not stall the run.
	l.receipts.Lock()
	defer l.receipts.Unlock()
	rec := l.snapshot()
	if rec.FinalSigned {
		return errFinalDone
	}
	now := time.Now()
	if final {
		// Never before a receipt already signed: after a crash the end
		// may have been estimated short of the last interim receipt.
		now = latest(rec.End, rec.LastAlive)
	}
	r := ledger.Receipt{
		Lease:     rec.ID(),
		Job:       rec.Lease.Terms.Job,
		Provider:  p.d.Self,
		Submitter: submitter,
		GPUs:      len(rec.Lease.Terms.GPUs),
		Seq:       rec.Seq,
		Final:     final,
		HeldFrom:  rec.Start,
		HeldUntil: now,
		Phase:     rec.State.phase(),
		Prev:      rec.Prev,
		GPUModel:  p.gpuModel(rec.Lease.Terms.GPUs),
	}
	if final {
		rec.End = now
		r.Outcome, r.Attribution, r.ExitCode, r.Reason = rec.Outcome, rec.Attribution, rec.ExitCode, rec.Reason
		r.Output, r.Checkpoint = rec.Output, rec.Checkpoint
		r.Phases = rec.phases()
		r.GPUsSeen = rec.GPUsSeen
		if !rec.OutputAcked.IsZero() && !rec.OutputStart.IsZero() {
			r.OutputWait = rec.OutputAcked.Sub(rec.OutputStart).Seconds()
		}
	}
	if err := r.SignProvider(p.d.Key); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ReceiptTimeout)
	defer cancel()
	var rep wire.ReceiptReply
	if err := p.d.Calls.Call(cctx, submitter, wire.ProtoReceipt, wire.ReceiptRequest{Receipt: raw, Steps: rec.steps()}, &rep); err != nil {
		return fmt.Errorf("countersign receipt %d: %w", r.Seq, err)
	}
	if len(rep.Dispute) > 0 && final {
		return p.recordDispute(ctx, l, r, rep.Dispute)
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
		if cr.Lease != r.Lease || cr.Seq != r.Seq || cr.Provider != p.d.Self || cr.Verify() != nil {
			return errors.New("the submitter countersigned a different receipt")
		}
		adopted = true
	}
	// Stored whatever happens to ctx now: the submitter has countersigned
	// and stored it, and the chain must not go on without it here.
	if _, err := p.d.Ledger.Append(context.WithoutCancel(ctx), cr); err != nil {
		return fmt.Errorf("store receipt: %w", err)
	}
	p.d.Metrics.Receipts.Inc()
	if err := p.update(l, func(r *Record) {
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
func (p *Provider) recordDispute(ctx context.Context, l *lease, ours ledger.Receipt, raw json.RawMessage) error {
	theirs, err := ledger.DecodeReceipt(raw)
	if err != nil {
		return fmt.Errorf("the submitter's record: %w", err)
	}
	if err := theirs.Verify(); err != nil || theirs.Lease != ours.Lease || theirs.Signer != ledger.SignerSubmitter {
		return fmt.Errorf("the submitter's record of lease %s does not hold: %v", ours.Lease, err)
	}
	if _, err := p.d.Ledger.RecordDispute(context.WithoutCancel(ctx), ours.Lease, ours, theirs); err != nil {
		return fmt.Errorf("record dispute: %w", err)
	}
	p.log.Warn("the submitter disputes the final receipt; both versions recorded", "lease", ours.Lease)
	return p.update(l, func(r *Record) { r.FinalSigned = true })
}

// release ends a lease: the meter stops, the GPUs go back into the offer
// and the release is announced. The final receipt follows (settle).
func (p *Provider) release(l *lease, end time.Time) {
	p.change(l, func(r *Record) { r.End, r.State = end, Released })
	rec := l.snapshot()
	t := rec.Lease.Terms

	// The GPUs go back first: the final receipt's countersignature may take
	// a while, and nothing runs on them any more.
	p.mu.Lock()
	for _, g := range t.GPUs {
		if p.held[g].lease == t.ID {
			delete(p.held, g)
		}
	}
	delete(p.leases, t.ID)
	p.mu.Unlock()
	p.d.OfferChanged()

	body := rec.release()
	p.announceRelease(l, body)
	p.log.Info("lease released", "lease", t.ID, "outcome", body.Outcome, "held", time.Duration(body.HeldMs)*time.Millisecond)
}
