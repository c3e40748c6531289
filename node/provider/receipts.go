package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// receipts are one lease's chain of receipts on its provider: an interim
// receipt every interval while compute is held, both sides signing, the
// final one after release (settle), or, when the submitter cannot
// countersign, this side's own record or both sides' versions of a
// dispute. Each receipt links to the last, so they go one at a time.
type receipts struct {
	*env // immutable, shared with the role
	// lease is the lease's state, shared with its runner; its locks are
	// taken under mu, never the reverse.
	lease *leaseState
	// submitter is the lease's submitter, who countersigns; gpuModel is
	// the model of the leased GPUs, as receipts name it. Immutable.
	submitter peer.ID
	gpuModel  string

	// mu serialises receipt exchanges. An ordering lock: it is held while
	// the submitter answers (Calls.Call) and while the ledger stores the
	// receipt (Ledger.Append, AppendOneSided, RecordDispute).
	mu sync.Mutex
	// now asks for an interim receipt at once (the run started).
	now chan struct{}
}

// ask asks for an interim receipt at once, unless one is asked for
// already.
func (rc *receipts) ask() {
	select {
	case rc.now <- struct{}{}:
	default:
	}
}

// oneSided stores, once, this side's final record of a released
// lease, signed by the provider alone and carrying the countersigned lease
// as evidence.
func (rc *receipts) oneSided() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec := rc.lease.snapshot()
	if rec.OneSided || rec.FinalSigned || rec.State != Released {
		return
	}
	terms, err := json.Marshal(rec.Lease.Terms)
	if err != nil {
		rc.log.Error("one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	end := bounded(latest(rec.End, rec.LastAlive), rec.heldUntilMost())
	rec.End = end
	r := ledger.Receipt{
		Lease: rec.ID(), Job: rec.Lease.Terms.Job, Provider: rc.d.Self, Submitter: rc.submitter,
		GPUs: len(rec.Lease.Terms.GPUs), GPUModel: rc.gpuModel,
		CPUs: rec.Lease.Terms.CPUs, MemoryBytes: rec.Lease.Terms.MemoryBytes, DiskBytes: rec.Declaration.Request.DiskBytes(),
		Seq: rec.Seq, Prev: rec.Prev, Final: true,
		HeldFrom: rec.Start, HeldUntil: end, Phase: rec.State.phase(),
		Outcome: rec.Outcome, Attribution: rec.Attribution, ExitCode: rec.ExitCode, Reason: rec.Reason,
		Output: rec.Output, Checkpoint: rec.Checkpoint, Phases: rec.phases(),
		GPUsSeen: rec.GPUsSeen, Relay: relayOf(rec), CheckpointAt: rec.keptUpTo(),
		Signer:   ledger.SignerProvider,
		Evidence: &ledger.LeaseEvidence{Terms: terms, ProviderSig: rec.Lease.ProviderSig, SubmitterSig: rec.Lease.SubmitterSig},
	}
	if err := r.SignOneSided(rc.d.Key); err != nil {
		rc.log.Error("sign one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	if _, err := rc.d.Ledger.AppendOneSided(rc.hard, r); err != nil {
		rc.log.Error("store one-sided record", "lease", rec.ID(), "err", err)
		return
	}
	rc.log.Info("submitter away: stored this side's own record of the lease", "lease", rec.ID())
	rc.lease.change(func(r *Record) { r.OneSided = true })
}

// errWithheld says a receipt was not offered: the provider misbehaves on
// purpose (Deps.Misbehave).
var errWithheld = errors.New("receipt withheld")

// errFinalDone says the final receipt was already exchanged.
var errFinalDone = errors.New("final receipt already signed")

// interim signs a receipt every interval while compute is held. A
// submitter that refuses maxRefusedReceipts of them in a row has the lease
// stopped and is struck off (strikes.go): the run would go on unpaid.
func (rc *receipts) interim(ctx context.Context) {
	t := time.NewTicker(rc.cfg.ReceiptInterval)
	defer t.Stop()
	refused := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-rc.now:
		case <-t.C:
		}
		now := time.Now()
		rc.lease.change(func(r *Record) { r.LastAlive = now })
		err := rc.exchange(ctx, false)
		switch {
		case err == nil:
			refused = 0
			continue
		case refusedReceipt(ctx, err):
			refused++
		}
		rc.log.Warn("interim receipt", "lease", rc.lease.snapshot().ID(), "err", err, "refused in a row", refused)
		if refused == maxRefusedReceipts {
			t, cancel := rc.lease.stopper()
			rc.strikes.strike(rc.submitter, fmt.Sprintf("refused or left unanswered %d receipts of lease %s in a row", refused, t.ID))
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

// exchange signs the next receipt, has the submitter countersign it
// and stores it.
func (rc *receipts) exchange(ctx context.Context, final bool) error {
	if rc.d.Misbehave != nil && !rc.d.Misbehave.Receipts() {
		return errWithheld
	}
	// Receipts of a lease go one at a time (each links to the last), but
	// the lease's state lock is not held while the submitter answers: a
	// submitter that is slow or gone must not stall the run.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec := rc.lease.snapshot()
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
		Provider:  rc.d.Self,
		Submitter: rc.submitter,
		GPUs:      len(rec.Lease.Terms.GPUs),
		Seq:       rec.Seq,
		Final:     final,
		HeldFrom:  rec.Start,
		HeldUntil: now,
		Phase:     rec.State.phase(),
		Prev:      rec.Prev,
		GPUModel:  rc.gpuModel,
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
	if err := r.SignProvider(rc.d.Key); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, rc.cfg.ReceiptTimeout)
	defer cancel()
	var rep wire.ReceiptReply
	if err := rc.d.Calls.Call(cctx, rc.submitter, wire.ProtoReceipt, wire.ReceiptRequest{Receipt: raw, Steps: rec.steps()}, &rep); err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			// Unanswered in time, whether on a stream the submitter
			// took or on the way to it (refusedReceipt tells which).
			return fmt.Errorf("countersign receipt %d: %w (%w)", r.Seq, err, context.DeadlineExceeded)
		}
		return fmt.Errorf("countersign receipt %d: %w", r.Seq, err)
	}
	if len(rep.Dispute) > 0 && final {
		return rc.dispute(ctx, r, rep.Dispute)
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
		if cr.Lease != r.Lease || cr.Seq != r.Seq || cr.Provider != rc.d.Self || cr.Verify() != nil {
			return errors.New("the submitter countersigned a different receipt")
		}
		adopted = true
	}
	// Stored whatever happens to ctx now: the submitter has countersigned
	// and stored it, and the chain must not go on without it here.
	if _, err := rc.d.Ledger.Append(context.WithoutCancel(ctx), cr); err != nil {
		return fmt.Errorf("store receipt: %w", err)
	}
	rc.d.Metrics.Receipts.Inc()
	if err := rc.lease.update(func(r *Record) {
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

// dispute stores both versions of a lease the submitter will not
// countersign: this side's final receipt and the submitter's own record.
// Nothing more is signed for the lease.
func (rc *receipts) dispute(ctx context.Context, ours ledger.Receipt, raw json.RawMessage) error {
	theirs, err := ledger.DecodeReceipt(raw)
	if err != nil {
		return fmt.Errorf("the submitter's record: %w", err)
	}
	if err := theirs.Verify(); err != nil || theirs.Lease != ours.Lease || theirs.Signer != ledger.SignerSubmitter {
		return fmt.Errorf("the submitter's record of lease %s does not hold: %v", ours.Lease, err)
	}
	if _, err := rc.d.Ledger.RecordDispute(context.WithoutCancel(ctx), ours.Lease, ours, theirs); err != nil {
		return fmt.Errorf("record dispute: %w", err)
	}
	rc.log.Warn("the submitter disputes the final receipt; both versions recorded", "lease", ours.Lease, "its reason", theirs.Reason)
	rc.strikes.strike(rc.submitter, "disputed the final receipt of lease "+ours.Lease)
	return rc.lease.update(func(r *Record) { r.FinalSigned = true })
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
