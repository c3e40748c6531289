package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// disputeMargin is how much later than this side's own record a provider's
// final receipt may end without other proof that the provider held the GPUs
// all along: its silence may have been a partition, not an absence.
const disputeMargin = time.Minute

// receipt countersigns a receipt of the job's lease that the Submitter
// checked as a message (HandleReceipt), after checking that it describes
// the lease and continues the chain, and stores it. It also reports whether
// the job is to be resumed: its provider restarted mid-run and ended the
// lease itself, provider-lost.
func (j receiptPhase) receipt(ctx context.Context, req wire.ReceiptRequest, r ledger.Receipt) (reply any, resume bool, err error) {
	// One receipt of a lease at a time: each continues the last.
	j.receipts.Lock()
	defer j.receipts.Unlock()
	j.mu.Lock()
	lease := *j.rec.Lease
	j.mu.Unlock()
	terms := lease.Terms
	if r.GPUs != len(terms.GPUs) {
		return nil, false, fmt.Errorf("receipt counts %d GPUs, the lease %d", r.GPUs, len(terms.GPUs))
	}
	if err := checkResources(r, terms, j.request()); err != nil {
		return nil, false, err
	}
	if err := checkHeld(lease, &r, time.Now()); err != nil {
		return nil, false, err
	}
	// A final receipt that comes after this side gave the provider up (a
	// partition healed) is still countersigned: the provider held the GPUs
	// and ran the job all along. A provider's own restart is billed only
	// to the last time it saw the lease held.
	lr, err := j.d.Ledger.Lease(ctx, r.Lease)
	if err != nil {
		return nil, false, err
	}
	prev := lr.Receipts
	if uint64(len(prev)) != r.Seq {
		// A retry of the last receipt (its reply was lost) gets the one
		// already countersigned: the provider adopts it and goes on from
		// there, so the chain never forks.
		if len(prev) > 0 && r.Seq == uint64(len(prev)-1) {
			last := prev[len(prev)-1].Receipt
			if last.Final {
				var e ending
				j.change(func(rec *Record) error { e = applyFinal(rec, last); return nil })
				e.log(j.log)
			}
			return wire.ReceiptReply{Receipt: mustJSON(last)}, false, nil
		}
		if !ended(prev) {
			return nil, false, fmt.Errorf("receipt %d out of sequence (have %d)", r.Seq, len(prev))
		}
	}
	if ended(prev) {
		return nil, false, p2p.Refuse(wire.CodeAfterFinal, fmt.Errorf("lease %s ended with its final receipt, seq %d", r.Lease, len(prev)-1))
	}
	if !r.Final && (len(lr.OneSided) > 0 || len(lr.Disputes) > 0) {
		// This side ended the lease (it gave the provider up): only a
		// final receipt may still settle it.
		return nil, false, p2p.Refuse(wire.CodeAfterFinal, fmt.Errorf("lease %s was released on this side; only its final receipt is taken", r.Lease))
	}
	if len(prev) > 0 && prev[len(prev)-1].Receipt.Digest() != r.Prev {
		return nil, false, errors.New("receipt does not continue the chain")
	}
	if err := (probePhase{j.jobTracker}).check(r.Lease, &r); err != nil {
		return nil, false, err
	}
	probeEnded := r.Final && (probePhase{j.jobTracker}).ended(r.Lease)
	if r.Final && !probeEnded {
		if ours, ok := j.disputes(ctx, r); ok {
			if _, err := j.d.Ledger.RecordDispute(ctx, r.Lease, ours, r); err != nil {
				return nil, false, fmt.Errorf("record dispute: %w", err)
			}
			j.log.Warn("final receipt disputed: it claims time this node did not see held", "lease", r.Lease, "claimed_until", r.HeldUntil, "seen_until", ours.HeldUntil)
			j.change(func(rec *Record) error { rec.Reason = "disputed: " + rec.Reason; return nil })
			return wire.ReceiptReply{Dispute: mustJSON(ours)}, false, nil
		}
		if reply, disputed, err := j.checkOutcome(ctx, lease, r); disputed || err != nil {
			// A preempted job goes on from the checkpoint this node holds.
			return reply, disputed && r.Outcome == ledger.OutcomePreempted, err
		}
	}
	if err := r.Countersign(j.d.Key); err != nil {
		return nil, false, err
	}
	if _, err := j.d.Ledger.Append(ctx, r); err != nil {
		return nil, false, err
	}
	j.d.Metrics.Receipts.Inc()
	if probeEnded {
		(probePhase{j.jobTracker}).requeue(ctx, r, terms.GPUs)
		return wire.ReceiptReply{Receipt: mustJSON(r)}, false, nil
	}
	now := time.Now()
	// The receipt is in the ledger, the record of what was held; the job's
	// own record follows, and a failure to write it is logged and counted
	// (write), as with change.
	var e ending
	var gpus []string
	_ = j.apply(func(cur *jobTracker) error {
		rec := cur.rec
		rec.LastReceipt = now
		cur.lastContact = now
		rec.reached(req.Steps, now)
		if r.Final {
			e = applyFinal(rec, r)
		}
		if rec.Lease != nil && rec.Lease.Terms.ID == r.Lease {
			gpus = rec.Lease.Terms.GPUs
		}
		return nil
	})
	e.log(j.log)
	if r.Final && isTask(r.Job) {
		// A task's provider leaves its release to this node.
		j.batch.release(j.keyOf(marketOf(j.jobTracker)), wire.ReleaseBody{Lease: r.Lease, Job: r.Job, Provider: r.Provider.String(), Submitter: r.Submitter.String(), GPUs: gpus,
			Outcome: r.Outcome, Attribution: r.Attribution,
			HeldMs: r.HeldUntil.Sub(r.HeldFrom).Milliseconds(), At: r.HeldUntil.UnixMilli()})
	}
	resume = r.Final && (r.Outcome == ledger.OutcomeProviderLost || r.Outcome == ledger.OutcomeFailed || r.Outcome == ledger.OutcomePreempted)
	return wire.ReceiptReply{Receipt: mustJSON(r)}, resume, nil
}

// disputes decides whether a final receipt from a provider this node gave up
// for lost claims more than it can countersign: it ends well after this
// side's own record, and the job's output, the proof that the provider went
// on working, never reached this node. It returns this side's record when
// it disputes.
func (j receiptPhase) disputes(ctx context.Context, r ledger.Receipt) (ledger.Receipt, bool) {
	lr, err := j.d.Ledger.Lease(ctx, r.Lease)
	if err != nil || len(lr.OneSided) == 0 {
		return ledger.Receipt{}, false
	}
	ours := lr.OneSided[len(lr.OneSided)-1].Receipt
	j.mu.Lock()
	output := j.rec.Output
	j.mu.Unlock()
	if r.Output != "" && r.Output == output {
		return ledger.Receipt{}, false
	}
	if !r.HeldUntil.After(ours.HeldUntil.Add(disputeMargin)) {
		return ledger.Receipt{}, false
	}
	return ours, true
}

// checkResources checks the CPUs, memory and disk a receipt says its lease
// held, where it says any, against the lease's terms and the job's own
// declaration: a provider bills for no more than both parties agreed to.
// A receipt from a provider that predates them names none.
func checkResources(r ledger.Receipt, t wire.LeaseTerms, req market.Request) error {
	switch {
	case r.CPUs != 0 && r.CPUs != t.CPUs:
		return fmt.Errorf("receipt counts %d CPUs, the lease %d", r.CPUs, t.CPUs)
	case r.MemoryBytes != 0 && r.MemoryBytes != t.MemoryBytes:
		return fmt.Errorf("receipt counts %d bytes of memory, the lease %d", r.MemoryBytes, t.MemoryBytes)
	case r.DiskBytes != 0 && r.DiskBytes != req.DiskBytes():
		return fmt.Errorf("receipt counts %d bytes of disk, the job declared %d", r.DiskBytes, req.DiskBytes())
	}
	return nil
}

// ending is what a final receipt changed on a job's record, to be logged
// once the record's lock is released; the zero ending logs nothing.
type ending struct {
	job, lease  string
	outcome     ledger.Outcome
	attribution ledger.Attribution
	released    bool   // the job was not released before
	mismatch    string // the record's GPU mismatch, with a lease
}

// applyFinal records a final receipt's ending on the job. The caller holds
// the job's mu (through update).
func applyFinal(r *Record, fin ledger.Receipt) ending {
	e := ending{job: r.ID, lease: fin.Lease, outcome: fin.Outcome, attribution: fin.Attribution, released: r.State != api.JobReleased}
	// The final receipt, signed by both, is the record: it replaces this
	// side's own verdict (a provider given up for lost during a partition
	// may come back with the job completed).
	r.State = api.JobReleased
	r.setEnding(fin.Ending())
	if fin.Checkpoint != "" && r.Checkpoint == "" {
		r.Checkpoint = fin.Checkpoint
	}
	r.GPUsSeen = fin.GPUsSeen
	r.Relay = ""
	if fin.Relay != "" {
		r.Relay = fin.Relay.String()
	}
	if r.Lease != nil {
		r.GPUMismatch = gpuMismatch(fin, r.Lease.Terms.GPUs, r.Declaration.Request.GPUModel)
		e.mismatch = r.GPUMismatch
	}
	r.step(api.StepRelease, time.Now())
	return e
}

// log logs what the final receipt changed.
func (e ending) log(l *slog.Logger) {
	if e.released {
		l.Info("job released", "job", e.job, "outcome", e.outcome, "attribution", e.attribution)
	}
	if e.mismatch != "" {
		l.Warn("the run saw other GPUs than were leased or declared", "job", e.job, "lease", e.lease, "mismatch", e.mismatch)
	}
}

// ended reports whether a lease's chain of receipts ends in a final one.
func ended(chain []ledger.Entry) bool {
	return len(chain) > 0 && chain[len(chain)-1].Receipt.Final
}

// recordOneSided stores this side's final record of a lease whose provider
// vanished, ended as e says.
func (j lossWatch) recordOneSided(ctx context.Context, l wire.SignedLease, es []ledger.Entry, from, until time.Time, e ledger.Ending) {
	t := l.Terms
	prov, err := peer.Decode(t.Provider)
	if err != nil {
		// Checked when the lease was accepted: the record was damaged since.
		j.log.Error("one-sided record: the lease names a bad provider", "lease", t.ID, "err", err)
		return
	}
	terms, err := json.Marshal(t)
	if err != nil {
		return
	}
	r := ledger.Receipt{
		Lease: t.ID, Job: t.Job, Provider: prov, Submitter: j.d.Self, GPUs: len(t.GPUs),
		CPUs: t.CPUs, MemoryBytes: t.MemoryBytes, DiskBytes: j.request().DiskBytes(),
		Final: true, HeldFrom: from, HeldUntil: until, Phase: ledger.PhaseRun,
		Outcome: e.Outcome, Attribution: e.Attribution, Reason: e.Reason, ExitCode: e.ExitCode,
		Signer:   ledger.SignerSubmitter,
		Evidence: &ledger.LeaseEvidence{Terms: terms, ProviderSig: l.ProviderSig, SubmitterSig: l.SubmitterSig},
	}
	if n := len(es); n > 0 {
		last := es[n-1].Receipt
		r.Seq, r.Prev = uint64(n), last.Digest()
		r.HeldFrom, r.GPUModel, r.Phase = last.HeldFrom, last.GPUModel, last.Phase
		r.HeldUntil = latest(r.HeldUntil, last.HeldUntil)
	}
	if r.HeldUntil.Before(r.HeldFrom) {
		r.HeldUntil = r.HeldFrom
	}
	if err := r.SignOneSided(j.d.Key); err != nil {
		j.log.Error("sign one-sided record", "lease", t.ID, "err", err)
		return
	}
	if _, err := j.d.Ledger.AppendOneSided(context.WithoutCancel(ctx), r); err != nil {
		j.log.Error("store one-sided record", "lease", t.ID, "err", err)
		return
	}
	j.d.Metrics.Receipts.Inc()
}

// mustJSON marshals one of the fixed types of a reply.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable types reach here
	}
	return b
}
