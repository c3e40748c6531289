package submitter

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What a proposal claims, checked against what this node saw and decided
// itself before it countersigns (docs/protocol.md, "Strangers"): a
// countersignature says "this matches what I decided and observed", so a
// peer's word alone never earns one. In order, each refusal with its code:
//
//   - the terms bound the lease's held time (ledger.BoundRule), and were
//     signed now: within ledger.MaxClockSkew of this node's clock, expiring
//     no later than a proposal may live (CodeStale);
//   - the provider holds a current offer in this node's view (CodeNoOffer):
//     without one nothing says it has the GPUs it names;
//   - that offer fits the job: it takes work, and names each GPU of the
//     proposal, of the requested model and memory (CodeUnfit);
//   - this node's own Match gave the job to the provider (CodeNotAssigned):
//     one of its last assignedFor epoch passes assigned it or reserved it
//     for it, or a pass on its view as it stands does (Deps.Placement), for
//     a provider that proposes from a pass between epochs, which this node
//     has not run.
//
// A job declared in a class market this node follows but does not take
// part in (Markets.Follow) is checked against that market's offers and a
// pass on its view (Followed): this node runs no epoch there. While the
// node does not follow it, every proposal is refused (CodeNoOffer).
//
// A proposal for a job no longer queued gets CodeNotQueued first, so that
// an honest provider that lost a race closes the job in its view. A
// provider with an offer refused as stale or unfit is avoided for the job
// at once, as a squatter is (avoid.go): an honest one's offer and clock
// never say otherwise. One refused as unassigned is only refused, however
// often: the refusal already keeps the lease from it, and on a loaded
// network an honest provider's view differs from this node's for many
// passes (a requeued job was proposed for four times in 0.6 s before this
// node's first pass on it, in TestSoak). Avoiding it then cascades: the
// avoid reaches the other peers' views later than this node's, so their
// Match gives the job to the next provider, which proposes, is refused
// and is avoided in turn, until every candidate is and the job waits for
// the first avoid to lift. A provider without an offer is only refused
// too: no Match places a job on it, so avoiding it would change nothing.

// assignedFor is how many of this node's epoch passes an assignment counts
// for: the provider proposes in the pass that assigns it the job, or, its
// proposal lost or refused, in one of the next.
const assignedFor = 3

// Placement says what this node's Match, on its view as it stands, gives a
// provider (epoch.Judge).
type Placement interface {
	Assigns(job, provider string, now time.Time) bool
}

// claimCheck checks a proposal's claims against this node's view, its
// Match and its reservations (see above). Immutable after New; what it
// reads is guarded by the Submitter's mu (pass), the stage's and each
// tracker's.
type claimCheck struct {
	*parts
	stage *stageState
	// pass is the number of this node's last Match pass.
	pass func() uint64
}

// checkProposalTime checks that a proposal's terms are bounded and dated
// now.
func checkProposalTime(t wire.LeaseTerms, now time.Time) error {
	if t.Bound != ledger.BoundRule {
		return p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: the terms bind no held time (bound %d, want %d)", t.Bound, ledger.BoundRule))
	}
	proposed := time.UnixMilli(t.Proposed)
	if d := proposed.Sub(now); d > ledger.MaxClockSkew || d < -ledger.MaxClockSkew {
		return p2p.Refuse(wire.CodeStale, fmt.Errorf("declined: proposed at %s, %s from this node's clock (at most %s)",
			proposed.UTC().Format(time.RFC3339), d.Round(time.Second), ledger.MaxClockSkew))
	}
	if life := time.Duration(t.Expires-t.Proposed) * time.Millisecond; life <= 0 || life >= view.LeaseOfferMargin {
		return p2p.Refuse(wire.CodeStale, fmt.Errorf("declined: the proposal lives %s (want under %s)", life, view.LeaseOfferMargin))
	}
	if now.UnixMilli() > t.Expires {
		return p2p.Refuse(wire.CodeStale, fmt.Errorf("declined: the proposal expired at %s", time.UnixMilli(t.Expires).UTC().Format(time.RFC3339)))
	}
	return nil
}

// checkOffer checks that the provider's offer, as this node holds it,
// fits the job's request with the GPUs the terms name.
func (s claimCheck) checkOffer(offers Offers, t wire.LeaseTerms, req market.Request, now time.Time) error {
	e, ok := offers.Get(t.Provider)
	if !ok || (e.Heartbeat > 0 && now.Sub(e.LastSeen) > view.MissedHeartbeats*e.Heartbeat) {
		return p2p.Refuse(wire.CodeNoOffer, fmt.Errorf("declined: no current offer of provider %s in this node's view", t.Provider))
	}
	o := e.Offer
	switch {
	case o.Draining:
		return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: provider %s is draining", t.Provider))
	case o.Closed:
		return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: provider %s is outside its hours", t.Provider))
	case t.Price < 0 || t.Price > o.Price:
		return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: the lease asks %s per GPU-hour, provider %s's offer %s", t.Price, t.Provider, o.Price))
	case req.MaxPrice > 0 && len(t.GPUs) > 0 && t.Price > req.MaxPrice:
		return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: the lease asks %s per GPU-hour, over the job's request.max_price %s", t.Price, req.MaxPrice))
	case o.CPUs < t.CPUs || o.MemoryBytes < t.MemoryBytes:
		return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: provider %s offers %d CPUs and %d bytes of memory, the lease needs %d and %d",
			t.Provider, o.CPUs, o.MemoryBytes, t.CPUs, t.MemoryBytes))
	}
	for _, u := range t.GPUs {
		g, ok := offered(o, u)
		switch {
		case !ok:
			return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: GPU %s is not in the provider's offer", u))
		case req.GPUModel != "" && !market.ModelMatches(g.Model, req.GPUModel):
			return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: GPU %s is a %s, the job asks for %s", u, g.Model, req.GPUModel))
		case req.GPUMemory > 0 && g.MemoryBytes < uint64(req.GPUMemory):
			return p2p.Refuse(wire.CodeUnfit, fmt.Errorf("declined: GPU %s has %d bytes of memory, the job asks for %d", u, g.MemoryBytes, uint64(req.GPUMemory)))
		}
	}
	return nil
}

// offered finds the GPU with UUID u in o.
func offered(o market.Offer, u string) (market.GPU, bool) {
	for _, g := range o.GPUs {
		if g.UUID == u {
			return g, true
		}
	}
	return market.GPU{}, false
}

// assignedTo reports whether this node's Match gave job j to provider: one
// of its last assignedFor epoch passes assigned the job to it, the last
// reserved it for it, or a pass on the view as it stands assigns or
// reserves it. A job of a market this node follows, not its own, has no
// epoch's passes: only a pass on that market's view counts.
func (s claimCheck) assignedTo(j *jobTracker, provider string, now time.Time) bool {
	m := marketOf(j)
	if !s.ownMarket(m) {
		_, placement, ok := s.judgedIn(m)
		return ok && placement != nil && placement.Assigns(j.id, provider, now)
	}
	pass := s.pass()
	j.mu.Lock()
	as := j.assigned[provider]
	recent := as != nil && as.last != 0 && pass-as.last < assignedFor
	j.mu.Unlock()
	if recent {
		return true
	}
	s.stage.mu.Lock()
	reserved := s.stage.reserved[j.id].String() == provider
	s.stage.mu.Unlock()
	if reserved {
		return true
	}
	return s.d.Placement != nil && s.d.Placement.Assigns(j.id, provider, now)
}

// checkClaims checks a proposal for the queued job j against this node's
// view and Match (see above); avoid, when set, says why the provider's
// refusals call for it to be avoided for the job.
func (s claimCheck) check(j *jobTracker, from peer.ID, t wire.LeaseTerms, now time.Time) (avoid string, err error) {
	m := marketOf(j)
	offers, _, ok := s.judgedIn(m)
	if !ok {
		return "", p2p.Refuse(wire.CodeNoOffer, fmt.Errorf("declined: job %s is of market %s, which this node does not follow now", t.Job, m))
	}
	err = s.checkOffer(offers, t, j.request(), now)
	if err == nil && !s.assignedTo(j, t.Provider, now) {
		err = p2p.Refuse(wire.CodeNotAssigned, fmt.Errorf("declined: no Match of this node gave job %s to provider %s", t.Job, t.Provider))
	}
	if err == nil {
		return "", nil
	}
	if j.misproposed(from, p2p.RefusalCode(err)) {
		avoid = fmt.Sprintf("proposed a lease its offer does not allow (%s)", p2p.RefusalCode(err))
	}
	return avoid, err
}

// misproposed reports whether a refused proposal of provider for the job,
// refused with code, calls for the provider to be avoided for it.
func (j *jobTracker) misproposed(provider peer.ID, code string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if provider == j.d.Self || j.rec.State != api.JobQueued {
		return false
	}
	return code == wire.CodeUnfit || code == wire.CodeStale
}

// request is the job's request, as its own declaration states it.
func (j *jobTracker) request() market.Request {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rec.Declaration.Request
}

// checkHeld refuses, with CodeOutsideLease, a receipt whose held time the
// lease does not allow (ledger.CheckHeld), or that claims time still to
// come by this node's clock.
func checkHeld(lease wire.SignedLease, r *ledger.Receipt, now time.Time) error {
	if r.HeldUntil.After(now.Add(maxClockSkew)) {
		return p2p.Refuse(wire.CodeOutsideLease, fmt.Errorf("%w: held until %s, still to come by this node's clock", ledger.ErrOutsideLease, r.HeldUntil.UTC().Format(time.RFC3339)))
	}
	ev := lease.Evidence()
	t, err := ev.Parse()
	if err != nil {
		return err
	}
	if _, _, ok := t.HeldWindow(); !ok {
		// Terms from before the rule bound the start only.
		if r.HeldFrom.Before(t.Proposed.Add(-maxClockSkew)) {
			return p2p.Refuse(wire.CodeOutsideLease, fmt.Errorf("%w: held from before the proposal", ledger.ErrOutsideLease))
		}
		return nil
	}
	if err := ledger.CheckHeld(r, t); err != nil {
		return p2p.Refuse(wire.CodeOutsideLease, err)
	}
	return nil
}

// checkpointAtTolerance is how far a final receipt's checkpoint_at may be
// from the time its provider announced the checkpoint with: both are the
// provider's one reading, cut to the millisecond.
const checkpointAtTolerance = time.Second

// checkOutcome checks what a final receipt says of how the lease ended
// against what this node saw: completed only with the output this node
// fetched and checked (HandleOutput), checkpoint_at only at a checkpoint
// its provider announced (HandleEvent) and this node holds. A receipt that
// claims otherwise is disputed: this node signs its own version, with the
// outcome or checkpoint it saw and the reason, and both are recorded
// (disputed true, the reply carrying this node's version). A checkpoint
// announced and still being pulled is refused for now with CodeBusy: the
// provider offers the receipt again.
func (j receiptPhase) checkOutcome(ctx context.Context, lease wire.SignedLease, r ledger.Receipt) (reply any, disputed bool, err error) {
	j.mu.Lock()
	rec := j.rec
	output, ckpt, ckptLease, ckptAt := rec.Output, rec.Checkpoint, rec.CheckpointLease, rec.CheckpointAt
	j.mu.Unlock()
	ours := r
	var why string
	if r.Outcome == ledger.OutcomeCompleted && (r.Output == "" || r.Output != output) {
		why = "the provider says it completed, but its output never reached this node"
		ours.Outcome, ours.Attribution, ours.Output = ledger.OutcomeOutputLost, ledger.AttributionProvider, ""
	}
	if !r.CheckpointAt.IsZero() {
		held := r.Checkpoint == ckpt && ckptLease == r.Lease
		switch {
		case !held && (runPhase{j.jobTracker}).pulling(r.Lease, r.Checkpoint):
			return nil, false, p2p.Refuse(wire.CodeBusy, fmt.Errorf("checkpoint %s of lease %s is still being pulled; offer the final receipt again", r.Checkpoint, r.Lease))
		case !held:
			why = fmt.Sprintf("the receipt says checkpoint %s was taken at %s, but its provider never announced it to this node",
				r.Checkpoint, r.CheckpointAt.UTC().Format(time.RFC3339))
		case absDuration(r.CheckpointAt.Sub(ckptAt)) > checkpointAtTolerance:
			why = fmt.Sprintf("the receipt says checkpoint %s was taken at %s, but its provider announced it taken at %s",
				r.Checkpoint, r.CheckpointAt.UTC().Format(time.RFC3339), ckptAt.UTC().Format(time.RFC3339))
		}
		if why != "" {
			ours.Checkpoint, ours.CheckpointAt = "", time.Time{}
			if ckptLease == r.Lease && !ckptAt.Before(r.HeldFrom) && !ckptAt.After(r.HeldUntil) {
				ours.Checkpoint, ours.CheckpointAt = ckpt, ckptAt
			}
		}
	}
	if why == "" {
		return nil, false, nil
	}
	ours.Reason = "disputed: " + why
	ours.Signer, ours.ProviderSig, ours.SubmitterSig = ledger.SignerSubmitter, nil, nil
	ev := lease.Evidence()
	ours.Evidence = &ev
	if err := ours.SignOneSided(j.d.Key); err != nil {
		return nil, false, fmt.Errorf("sign this node's version: %w", err)
	}
	if _, err := j.d.Ledger.RecordDispute(ctx, r.Lease, ours, r); err != nil {
		return nil, false, fmt.Errorf("record dispute: %w", err)
	}
	j.log.Warn("final receipt disputed: it claims an ending this node did not see", "lease", r.Lease, "provider", r.Provider, "why", why)
	var e ending
	j.change(func(rec *Record) error { e = applyFinal(rec, ours); return nil })
	e.log(j.log)
	return wire.ReceiptReply{Dispute: mustJSON(ours)}, true, nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
