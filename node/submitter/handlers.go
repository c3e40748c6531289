package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The streams a provider opens about one of this node's jobs (wire.Proto*)
// come in here. Each handler checks what it can of the message alone (its
// form, its signatures, its parties), finds the job's tracker in the
// registry and hands the message to it: what the job does with it is the
// tracker's (proposal.go, progress.go, receipt.go). What reaches beyond the
// one job starts here: a checkpoint's pull, run as one of the Submitter's
// tasks, and an automatic resumption, which is a new job.

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
	if !distinct(t.GPUs) {
		return nil, p2p.Refuse(wire.CodeDeclined, errors.New("declined: the proposal names a GPU twice"))
	}
	j := s.jobs.get(t.Job)
	if j == nil {
		return nil, unknownJob(t.Job)
	}
	now := time.Now()
	if err := checkProposalTime(t, now); err != nil {
		if _, onOffer := s.d.Offers.Get(t.Provider); onOffer && j.misproposed(from, p2p.RefusalCode(err)) {
			s.tasks.Go(func() { (failureWatch{j}).avoid(s.ctx, from.String(), "", "proposed a lease dated away from now") })
		}
		return nil, err
	}
	if j.state() == api.JobQueued && from != s.d.Self {
		// A job leased or ended meanwhile is declined by propose, with
		// the code that closes it in the provider's view. This node's
		// own provider proposes only what this node's Match gave it.
		avoid, err := s.claims.check(j, from, t, now)
		if err == nil {
			avoid, err = s.verify.claims(ctx, j, t.Provider, now)
		}
		if avoid != "" {
			s.tasks.Go(func() { (failureWatch{j}).avoid(s.ctx, from.String(), "", avoid) })
		}
		if err != nil {
			return nil, err
		}
	}
	var run *gangRun
	if gang, _, part := market.SplitTaskID(t.Job); part && j.isGangPart() {
		run = s.gangs.of(gang)
	}
	if run != nil && run.holds(t.Job, t.Provider) {
		return nil, p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: provider %s holds another part of gang %s", t.Provider, run.id))
	}
	reply, err := j.propose(from, sl)
	if err == nil && run != nil {
		run.leased() // the last part's lease starts the gang
	}
	return reply, err
}

// HandleEvent records a step the provider reached, or pulls a checkpoint.
func (s *Submitter) HandleEvent(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var ev wire.EventRequest
	if err := p2p.DecodeStrict(raw, &ev); err != nil {
		return nil, err
	}
	j, err := s.jobs.leased(ev.Job, ev.Lease, from)
	if err != nil {
		return nil, err
	}
	var c cid.Cid
	if ev.Checkpoint != "" {
		if c, err = cid.Decode(ev.Checkpoint); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := (runPhase{j}).event(ev); err != nil {
		return nil, err
	}
	if c.Defined() {
		now := time.Now()
		at := time.UnixMilli(ev.At)
		if d := at.Sub(now); d > maxClockSkew || d < -maxClockSkew {
			at = now // a time off by more than the skew allowed is not believed
		}
		start, err := (runPhase{j}).queueCheckpoint(ev.Lease, checkpointEvent{root: c, n: ev.N, at: at})
		if err != nil {
			return nil, err
		}
		if start {
			// Pull it now, so that a provider that vanishes does not take
			// the last checkpoint with it.
			s.tasks.Go(func() { (runPhase{j}).pullCheckpoints(s.ctx, from, ev.Lease) })
		}
	}
	return struct{}{}, nil
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
	j, err := s.jobs.leased(req.Job, req.Lease, from)
	if err != nil {
		return nil, err
	}
	if err := (probePhase{j}).check(req.Lease, nil); err != nil {
		return nil, err
	}
	return (runPhase{j}).output(ctx, from, c, req)
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
	j, err := s.jobs.leased(r.Job, r.Lease, from)
	if err != nil {
		return nil, err
	}
	if r.Final && r.Checkpoint != "" && (r.Outcome == ledger.OutcomePreempted || j.isGangPart()) && (runPhase{j}).pulling(r.Lease, r.Checkpoint) {
		// The provider is being taken back, and may stop once this
		// receipt is countersigned, or the part's gang goes on, each part
		// from its own: the last checkpoint it took, which the job goes
		// on from, is pulled first while the provider still serves it.
		(runPhase{j}).awaitCheckpoint(ctx, r.Checkpoint, preemptedCheckpointWait)
	}
	reply, resume, err := (receiptPhase{j}).receipt(ctx, req, r)
	if resume {
		// A provider that restarted mid-run ends the lease itself; a job
		// that failed may have retries left; a preempted one goes on from
		// the last checkpoint its provider took, once pulled.
		s.tasks.Go(func() {
			if r.Outcome == ledger.OutcomePreempted && r.Checkpoint != "" && (runPhase{j}).pulling(r.Lease, r.Checkpoint) {
				(runPhase{j}).awaitCheckpoint(s.ctx, r.Checkpoint, s.cfg.OutputTimeout)
			}
			s.autoResume(s.ctx, r.Job)
		})
	}
	return reply, err
}

// preemptedCheckpointWait bounds how long the countersignature of a
// preempted lease's final receipt waits for its last checkpoint to be
// pulled: well inside the provider's receipt timeout (15s by default), so
// that a large checkpoint still pulling costs the exchange no retry.
const preemptedCheckpointWait = 10 * time.Second

// maxClockSkew is how far a provider's clock may be from this node's before
// its times are not believed: a step is recorded at this node's time
// instead, and a receipt claiming time outside the lease is refused.
const maxClockSkew = time.Minute

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
