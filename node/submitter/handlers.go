package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// HandleProposal answers a provider's lease proposal: accept the first for
// a queued job, decline every other. The acceptance is persisted before the
// countersignature leaves, so a crash cannot forget a lease it agreed to.
func (s *Submitter) HandleProposal(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.ProposeRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	sl := req.Lease
	t := sl.Terms
	if t.Provider != from.String() {
		return nil, fmt.Errorf("proposal names provider %s but came from %s", t.Provider, from)
	}
	if t.Submitter != s.d.Self.String() {
		return nil, errors.New("proposal is not addressed to this submitter")
	}
	if err := sl.Verify(false); err != nil {
		return nil, err
	}
	if err := wire.CheckTerms(t); err != nil {
		return nil, err
	}
	if time.Now().UnixMilli() > t.Expires {
		return nil, errors.New("proposal expired")
	}
	if !distinct(t.GPUs) {
		return nil, p2p.Refuse(wire.CodeDeclined, errors.New("declined: the proposal names a GPU twice"))
	}
	if e, ok := s.d.Offers.Get(t.Provider); ok {
		for _, u := range t.GPUs {
			if !slices.ContainsFunc(e.Offer.GPUs, func(g market.GPU) bool { return g.UUID == u }) {
				return nil, p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: GPU %s is not in the provider's offer", u))
			}
		}
	}
	j := s.get(t.Job)
	if j == nil {
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("job %s: %w", t.Job, ErrNotFound))
	}
	s.noteProposal(j, from)
	if err := sl.Countersign(s.d.Key); err != nil {
		return nil, err
	}
	var inputs []cid.Cid
	err := s.update(j, func(r *Record) error {
		if r.State != api.JobQueued {
			return p2p.Refuse(wire.CodeNotQueued, fmt.Errorf("declined: job %s is %s", t.Job, r.State))
		}
		if slices.Contains(r.Avoid, t.Provider) {
			// A view that has not caught up with the avoid list yet.
			return p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: provider %s failed job %s before", t.Provider, t.Job))
		}
		req := r.Declaration.Request
		if len(t.GPUs) != req.GPUs || t.Limit != req.Limit || t.CPUs != req.CPUs || t.MemoryBytes != uint64(req.Memory) {
			return p2p.Refuse(wire.CodeDeclined, errors.New("declined: terms do not match the declaration"))
		}
		now := time.Now()
		r.State = api.JobRenting
		r.Lease = &sl
		r.Wait = ""
		r.step(api.StepRent, now)
		j.lastContact = now
		inputs = r.contentRoots()
		return nil
	})
	if err != nil {
		if p2p.RefusalCode(err) != "" {
			return nil, err
		}
		// Not on disk: the countersignature must not leave. The job goes
		// back to the queue in memory too.
		s.change(j, func(r *Record) error {
			if r.Lease != nil && r.Lease.Terms.ID == t.ID {
				r.State, r.Lease = api.JobQueued, nil
				r.Steps = slices.DeleteFunc(r.Steps, func(st api.Step) bool { return st.Step != api.StepSubmit })
			}
			return nil
		})
		return nil, fmt.Errorf("accept proposal: %w", err)
	}
	for _, c := range inputs {
		s.d.Access.Allow(from, c)
	}
	s.log.Info("lease accepted", "job", t.Job, "lease", t.ID, "provider", from)
	return wire.ProposeReply{SubmitterSig: sl.SubmitterSig}, nil
}

// leased checks that r is under this lease from this provider.
func leased(r *Record, lease string, provider peer.ID) error {
	if r.Lease == nil || r.Lease.Terms.ID != lease || r.Lease.Terms.Provider != provider.String() {
		return p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("job %s is not leased as %s from %s", r.ID, lease, provider))
	}
	return nil
}

// leasedJob finds this node's job under a lease from the given provider.
func (s *Submitter) leasedJob(id, lease string, provider peer.ID) (*job, error) {
	j := s.get(id)
	if j == nil {
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("job %s: %w", id, ErrNotFound))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := leased(j.rec, lease, provider); err != nil {
		return nil, err
	}
	return j, nil
}

// HandleEvent records a step the provider reached, or pulls a checkpoint.
func (s *Submitter) HandleEvent(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var ev wire.EventRequest
	if err := p2p.DecodeStrict(raw, &ev); err != nil {
		return nil, err
	}
	j, err := s.leasedJob(ev.Job, ev.Lease, from)
	if err != nil {
		return nil, err
	}
	var c cid.Cid
	if ev.Checkpoint != "" {
		if c, err = cid.Decode(ev.Checkpoint); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	now := time.Now()
	err = s.update(j, func(r *Record) error {
		j.lastContact = now
		r.reached([]wire.StepAt{{Step: ev.Step, At: ev.At}}, now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.Defined() {
		// Pull it now, so that a provider that vanishes does not take the
		// last checkpoint with it.
		s.tasks.Go(func() { s.pullCheckpoint(ev.Job, from, c, ev.N) })
	}
	return struct{}{}, nil
}

func (s *Submitter) pullCheckpoint(id string, from peer.ID, c cid.Cid, num int) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.OutputTimeout)
	defer cancel()
	reason := pinCheckpoint(id, num)
	if j := s.get(id); j != nil {
		if err := s.awaitDirect(ctx, j, from, fmt.Sprintf("pulling checkpoint %d", num)); err != nil {
			s.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
			return
		}
	}
	if _, err := s.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: reason, MaxBytes: s.cfg.MaxOutputBytes, Progress: s.d.Metrics.Returned}); err != nil {
		s.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
		return
	}
	j := s.get(id)
	var unpin []pinned
	kept := false
	if j != nil {
		s.change(j, func(r *Record) error {
			if num <= r.CheckpointN {
				return errors.New("a newer checkpoint arrived first")
			}
			if old, err := cid.Decode(r.Checkpoint); err == nil {
				unpin = append(unpin, pinned{old, pinCheckpoint(id, r.CheckpointN)})
			}
			r.Checkpoint, r.CheckpointN = c.String(), num
			kept = true
			return nil
		})
	}
	if !kept {
		unpin = append(unpin, pinned{c, reason})
	} else {
		s.log.Info("checkpoint pulled", "job", id, "n", num, "cid", c)
	}
	for _, u := range unpin {
		if err := s.d.Store.Unpin(ctx, u.root, u.reason); err != nil {
			s.log.Warn("unpin superseded checkpoint", "job", id, "cid", u.root, "err", err)
		}
	}
}

type pinned struct {
	root   cid.Cid
	reason string
}

// HandleOutput fetches and checks the whole output DAG, then acknowledges.
func (s *Submitter) HandleOutput(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.OutputRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	c, err := cid.Decode(req.Output)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	j, err := s.leasedJob(req.Job, req.Lease, from)
	if err != nil {
		return nil, err
	}
	if err := s.awaitDirect(ctx, j, from, "returning the output"); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	if _, err := s.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: pinOutput(req.Job), MaxBytes: s.cfg.MaxOutputBytes, Progress: s.d.Metrics.Returned}); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	j, err = s.leasedJob(req.Job, req.Lease, from)
	if err != nil {
		return nil, err
	}
	if len(req.Skipped) > maxSkipped {
		req.Skipped = req.Skipped[:maxSkipped]
	}
	if err := s.update(j, func(r *Record) error {
		r.reached(req.Steps, time.Now())
		r.Output, r.Skipped, r.Wait = c.String(), req.Skipped, ""
		if req.KeptUntil > 0 {
			r.ProviderKeeps = time.UnixMilli(req.KeptUntil)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	s.log.Info("output fetched", "job", req.Job, "cid", c)
	return struct{}{}, nil
}

// HandleReceipt countersigns a receipt the provider signed, after checking
// that it describes this lease and continues the chain, and stores it.
func (s *Submitter) HandleReceipt(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.ReceiptRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	r, err := ledger.DecodeReceipt(req.Receipt)
	if err != nil {
		return nil, err
	}
	if r.Provider != from || r.Submitter != s.d.Self {
		return nil, errors.New("receipt names other parties")
	}
	if err := r.Verify(); err != nil && !errors.Is(err, ledger.ErrUnsigned) {
		return nil, err
	}
	j, err := s.leasedJob(r.Job, r.Lease, from)
	if err != nil {
		return nil, err
	}
	// One receipt of a lease at a time: each continues the last.
	j.receipts.Lock()
	defer j.receipts.Unlock()
	s.mu.Lock()
	terms := j.rec.Lease.Terms
	s.mu.Unlock()
	if r.GPUs != len(terms.GPUs) {
		return nil, fmt.Errorf("receipt counts %d GPUs, the lease %d", r.GPUs, len(terms.GPUs))
	}
	signed := time.UnixMilli(terms.Proposed)
	if r.HeldFrom.Before(signed.Add(-maxClockSkew)) || r.HeldUntil.After(time.Now().Add(maxClockSkew)) {
		return nil, errors.New("receipt claims time outside the lease")
	}
	// A final receipt that comes after this side gave the provider up (a
	// partition healed) is still countersigned: the provider held the GPUs
	// and ran the job all along. A provider's own restart is billed only
	// to the last time it saw the lease held.
	prev, err := s.d.Ledger.ByLease(ctx, r.Lease)
	if err != nil {
		return nil, err
	}
	if uint64(len(prev)) != r.Seq {
		// A retry of the last receipt (its reply was lost) gets the one
		// already countersigned: the provider adopts it and goes on from
		// there, so the chain never forks.
		if len(prev) > 0 && r.Seq == uint64(len(prev)-1) {
			last := prev[len(prev)-1].Receipt
			if last.Final {
				s.change(j, func(rec *Record) error { s.applyFinal(rec, last); return nil })
			}
			return wire.ReceiptReply{Receipt: mustJSON(last)}, nil
		}
		return nil, fmt.Errorf("receipt %d out of sequence (have %d)", r.Seq, len(prev))
	}
	if len(prev) > 0 && prev[len(prev)-1].Receipt.Digest() != r.Prev {
		return nil, errors.New("receipt does not continue the chain")
	}
	if r.Final {
		if ours, ok := s.disputes(ctx, j, r); ok {
			if _, err := s.d.Ledger.RecordDispute(ctx, r.Lease, ours, r); err != nil {
				return nil, fmt.Errorf("record dispute: %w", err)
			}
			s.log.Warn("final receipt disputed: it claims time this node did not see held", "lease", r.Lease, "claimed_until", r.HeldUntil, "seen_until", ours.HeldUntil)
			s.change(j, func(rec *Record) error { rec.Reason = "disputed: " + rec.Reason; return nil })
			return wire.ReceiptReply{Dispute: mustJSON(ours)}, nil
		}
	}
	if err := r.Countersign(s.d.Key); err != nil {
		return nil, err
	}
	if _, err := s.d.Ledger.Append(ctx, r); err != nil {
		return nil, err
	}
	s.d.Metrics.Receipts.Inc()
	now := time.Now()
	// The receipt is in the ledger, the record of what was held; the job's
	// own record follows, and a failure to write it is logged and counted.
	s.change(j, func(rec *Record) error {
		rec.LastReceipt = now
		j.lastContact = now
		rec.reached(req.Steps, now)
		if r.Final {
			s.applyFinal(rec, r)
		}
		return nil
	})
	if r.Final && r.Outcome == ledger.OutcomeProviderLost {
		// A provider that restarted mid-run ends the lease itself.
		s.tasks.Go(func() { s.autoResume(s.ctx, r.Job) })
	}
	return wire.ReceiptReply{Receipt: mustJSON(r)}, nil
}

// maxClockSkew is how far a provider's clock may be from this node's before
// its times are not believed: a step is recorded at this node's time
// instead, and a receipt claiming time outside the lease is refused.
const maxClockSkew = time.Minute

// maxSkipped bounds the left-out entries a job's record keeps.
const maxSkipped = 20

// disputeMargin is how much later than this side's own record a provider's
// final receipt may end without other proof that the provider held the GPUs
// all along: its silence may have been a partition, not an absence.
const disputeMargin = time.Minute

// disputes decides whether a final receipt from a provider this node gave up
// for lost claims more than it can countersign: it ends well after this
// side's own record, and the job's output, the proof that the provider went
// on working, never reached this node. It returns this side's record when
// it disputes.
func (s *Submitter) disputes(ctx context.Context, j *job, r ledger.Receipt) (ledger.Receipt, bool) {
	lr, err := s.d.Ledger.Lease(ctx, r.Lease)
	if err != nil || len(lr.OneSided) == 0 {
		return ledger.Receipt{}, false
	}
	ours := lr.OneSided[len(lr.OneSided)-1].Receipt
	s.mu.Lock()
	output := j.rec.Output
	s.mu.Unlock()
	if r.Output != "" && r.Output == output {
		return ledger.Receipt{}, false
	}
	if !r.HeldUntil.After(ours.HeldUntil.Add(disputeMargin)) {
		return ledger.Receipt{}, false
	}
	return ours, true
}

// applyFinal records a final receipt's ending on the job. The caller holds
// s.mu (through update).
func (s *Submitter) applyFinal(r *Record, fin ledger.Receipt) {
	if r.State != api.JobReleased {
		s.log.Info("job released", "job", r.ID, "outcome", fin.Outcome, "attribution", fin.Attribution)
	}
	// The final receipt, signed by both, is the record: it replaces this
	// side's own verdict (a provider given up for lost during a partition
	// may come back with the job completed).
	r.State = api.JobReleased
	r.Outcome, r.Attribution, r.Reason, r.ExitCode = fin.Outcome, fin.Attribution, fin.Reason, fin.ExitCode
	if fin.Checkpoint != "" && r.Checkpoint == "" {
		r.Checkpoint = fin.Checkpoint
	}
	r.GPUsSeen = fin.GPUsSeen
	if r.Lease != nil {
		r.GPUMismatch = gpuMismatch(fin, r.Lease.Terms.GPUs, r.Declaration.Request.GPUModel)
		if r.GPUMismatch != "" {
			s.log.Warn("the run saw other GPUs than were leased or declared", "job", r.ID, "lease", fin.Lease, "mismatch", r.GPUMismatch)
		}
	}
	r.step(api.StepRelease, time.Now())
}

func distinct(s []string) bool {
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable types reach here
	}
	return b
}

// awaitDirect waits for a path to the provider that carries data (a relay
// carries a lease's messages but, by design, not its data), saying so in
// the job's status while it waits and why when it gives up, rather than
// stalling in silence.
func (s *Submitter) awaitDirect(ctx context.Context, j *job, from peer.ID, what string) error {
	if s.d.Path == nil {
		return nil
	}
	if path, _ := s.d.Path(from); path != p2p.PathRelayed {
		return nil
	}
	s.change(j, func(r *Record) error {
		r.Wait = what + ": waiting for a direct connection to the provider; a relayed one carries no data"
		return nil
	})
	err := p2p.AwaitDirect(ctx, s.d.Path, from, "the provider", p2p.DirectWait)
	s.change(j, func(r *Record) error {
		r.Wait = ""
		if err != nil {
			r.Wait = what + ": " + err.Error()
		}
		return nil
	})
	return err
}
