package submitter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// watchProviders ends, as provider-lost, the leases of this node's jobs
// whose provider has gone silent: no offer heartbeat and no message for
// ProviderLostAfter. The record of held time is the last receipt both
// signed; the job keeps the last checkpoint it pulled, and a declaration
// that asks for it is resumed from there at once.
func (s *Submitter) watchProviders(ctx context.Context) {
	tick := time.NewTicker(min(s.cfg.ProviderLostAfter/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, id := range s.silentProviders(now) {
				s.providerLost(ctx, id, now)
			}
			s.requeueUnconfirmed(now)
			s.checkFailures(ctx, now)
		}
	}
}

// silentProviders lists this node's leased jobs whose provider has not been
// heard from for ProviderLostAfter, and notes when the others were.
func (s *Submitter) silentProviders(now time.Time) []string {
	type leased struct {
		j        *job
		provider string
		last     time.Time
	}
	var jobs []leased
	s.mu.Lock()
	joined := s.joined
	if joined.IsZero() {
		// This node has heard no provider since it started: it is the one
		// cut off, not the providers.
		s.mu.Unlock()
		return nil
	}
	for _, j := range s.jobs {
		if j.rec.Lease == nil || j.rec.terminal() {
			continue
		}
		// After a restart, silence counts from when this node rejoined.
		jobs = append(jobs, leased{j, j.rec.Lease.Terms.Provider, latest(j.lastContact, joined)})
	}
	s.mu.Unlock()
	var out []string
	for _, l := range jobs {
		last := l.last
		if e, ok := s.d.Offers.Get(l.provider); ok && e.LastSeen.After(last) {
			last = e.LastSeen
		}
		// A connection proves nothing: a QUIC connection to a killed peer
		// looks alive until it idles out. Only a heartbeat or a message does.
		if p, err := peer.Decode(l.provider); err == nil && p == s.d.Self {
			last = now
		}
		if now.Sub(last) > s.cfg.ProviderLostAfter {
			s.mu.Lock()
			out = append(out, l.j.rec.ID)
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		if last.After(l.j.lastContact) {
			l.j.lastContact = last
		}
		s.mu.Unlock()
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// providerLost ends a job's lease on the submitter's side.
func (s *Submitter) providerLost(ctx context.Context, id string, now time.Time) {
	j := s.get(id)
	if j == nil {
		return
	}
	s.mu.Lock()
	r := j.rec
	if r.terminal() || r.Lease == nil {
		s.mu.Unlock()
		return
	}
	t, lease := r.Lease.Terms, *r.Lease
	lastHeard, rent := j.lastContact, r.stepAt(api.StepRent)
	unstarted := r.State == api.JobRenting && r.LastReceipt.IsZero()
	s.mu.Unlock()
	if unstarted {
		// Nothing was held for the job: it goes back to the queue rather
		// than ending with its provider.
		s.giveUpLease(ctx, failure{j: j, provider: t.Provider, lease: t.ID,
			reason: fmt.Sprintf("provider %s went silent before the run started", t.Provider)}, now)
		return
	}
	silent := now.Sub(lastHeard).Round(time.Second)
	reason := fmt.Sprintf("provider %s silent for %s", t.Provider, silent)

	// This side's own record of the lease comes first, so that a job shown
	// released always has its record: held from the lease's start until the
	// provider was last heard from, signed by this node alone with the
	// lease as evidence. The provider's final receipt supersedes it if the
	// provider comes back.
	es, err := s.d.Ledger.ByLease(ctx, t.ID)
	if err != nil {
		s.log.Warn("receipts of a lost lease", "lease", t.ID, "err", err)
	}
	s.recordOneSided(ctx, lease, es, rent, lastHeard, reason)

	err = s.update(j, func(r *Record) error {
		if r.terminal() || r.Lease == nil || r.Lease.Terms.ID != t.ID {
			return errSkip // the provider's final receipt came first
		}
		r.State = api.JobReleased
		r.Outcome, r.Attribution = ledger.OutcomeProviderLost, ledger.AttributionProvider
		r.Reason = reason
		r.step(api.StepRelease, now)
		return nil
	})
	if err == errSkip {
		return
	}
	s.log.Warn("provider lost", "job", id, "lease", t.ID, "provider", t.Provider, "silent", silent)

	// Everyone's view frees the lease, as it would on the provider's own
	// release; the held time the network charges is the last countersigned
	// receipt.
	var heldMs int64
	if len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	body := wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, HeldMs: heldMs, At: now.UnixMilli()}
	if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		s.log.Warn("announce provider-lost release", "lease", t.ID, "err", err)
	}
	s.autoResume(ctx, id)
}

// recordOneSided stores this side's final record of a lease whose provider
// vanished.
func (s *Submitter) recordOneSided(ctx context.Context, l wire.SignedLease, es []ledger.Entry, from, until time.Time, reason string) {
	t := l.Terms
	prov, err := peer.Decode(t.Provider)
	if err != nil {
		return
	}
	terms, err := json.Marshal(t)
	if err != nil {
		return
	}
	r := ledger.Receipt{
		Lease: t.ID, Job: t.Job, Provider: prov, Submitter: s.d.Self, GPUs: len(t.GPUs),
		Final: true, HeldFrom: from, HeldUntil: until, Phase: ledger.PhaseRun,
		Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: reason,
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
	if err := r.SignOneSided(s.d.Key); err != nil {
		s.log.Error("sign one-sided record", "lease", t.ID, "err", err)
		return
	}
	if _, err := s.d.Ledger.AppendOneSided(context.WithoutCancel(ctx), r); err != nil {
		s.log.Error("store one-sided record", "lease", t.ID, "err", err)
		return
	}
	s.d.Metrics.Receipts.Inc()
}

// errSkip tells update that there is nothing to change.
var errSkip = fmt.Errorf("nothing to change")

// autoResume resubmits a job lost with its provider, from its last
// checkpoint (or from the start, if none was taken), when its declaration
// asks for it and its resumes are not used up.
func (s *Submitter) autoResume(ctx context.Context, id string) {
	j := s.get(id)
	if j == nil {
		return
	}
	err := s.update(j, func(r *Record) error {
		cp := r.Declaration.Output.Checkpoints
		if r.Outcome != ledger.OutcomeProviderLost || r.Resumed || cp == nil || cp.Resume != market.ResumeAuto || r.Resumes >= cp.MaxResumes {
			return errSkip
		}
		r.Resumed = true
		return nil
	})
	if err == errSkip {
		return
	}
	if err != nil {
		// Not on disk: resuming now could resume twice after a restart.
		s.log.Warn("automatic resume not recorded; not resuming", "job", id, "err", err)
		return
	}
	r, err := s.Submit(ctx, api.SubmitRequest{ResumeOf: id}, nil)
	if err != nil {
		s.log.Warn("automatic resume", "job", id, "err", err)
		return
	}
	s.log.Info("resumed after losing its provider", "job", id, "as", r.ID)
}

// requeueUnconfirmed puts back in the queue a job whose lease this node
// countersigned but that its provider never announced: the countersignature
// was lost on the way, or the provider crashed before it recorded the lease.
// The provider never held the GPUs for it, so nothing is owed.
func (s *Submitter) requeueUnconfirmed(now time.Time) {
	wait := 2*s.cfg.ProposalTTL + 3*s.cfg.Heartbeat
	type candidate struct {
		j     *job
		lease string
	}
	var cands []candidate
	s.mu.Lock()
	for _, j := range s.jobs {
		r := j.rec
		if r.State != api.JobRenting || r.Lease == nil || r.Withdrawn {
			continue
		}
		if now.Sub(r.stepAt(api.StepRent)) < wait || !r.LastReceipt.IsZero() {
			continue
		}
		cands = append(cands, candidate{j, r.Lease.Terms.ID})
	}
	s.mu.Unlock()
	for _, c := range cands {
		if _, _, ok := s.d.Leases.LeaseParties(c.lease); ok {
			continue
		}
		err := s.update(c.j, func(r *Record) error {
			if r.State != api.JobRenting || r.Lease == nil || r.Lease.Terms.ID != c.lease || !r.LastReceipt.IsZero() {
				return errSkip
			}
			r.State = api.JobQueued
			r.Lease = nil
			r.Steps = slices.DeleteFunc(r.Steps, func(st api.Step) bool { return st.Step != api.StepSubmit })
			return nil
		})
		if err != errSkip {
			s.log.Warn("lease never announced by its provider: back in the queue", "job", c.j.rec.ID, "lease", c.lease)
		}
	}
}

// requeueLoop re-announces this node's queued jobs every RequeueEvery.
func (s *Submitter) requeueLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.RequeueEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.requeue(ctx)
	}
}

// requeue re-announces the queued jobs now.
func (s *Submitter) requeue(ctx context.Context) {
	var envs [][]byte
	type avoiding struct {
		env   []byte
		avoid []string
	}
	var withAvoid []avoiding
	s.mu.Lock()
	for _, j := range s.jobs {
		switch {
		case j.rec.State != api.JobQueued:
		case len(j.rec.Avoid) > 0:
			// Rare, and each carries its own list: announced apart.
			withAvoid = append(withAvoid, avoiding{j.rec.Envelope, slices.Clone(j.rec.Avoid)})
		default:
			envs = append(envs, j.rec.Envelope)
		}
	}
	s.mu.Unlock()
	for _, a := range withAvoid {
		s.announceAvoiding(ctx, a.env, a.avoid)
	}
	batches, tooLarge := wire.RequeueBatches(envs)
	if len(tooLarge) > 0 {
		// Refused at submit since; only a job queued by an older version
		// can be here.
		s.log.Warn("queued declarations too large to re-announce", "count", len(tooLarge))
	}
	for _, b := range batches {
		if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindRequeue, wire.RequeueBody{Declarations: b}); err != nil && ctx.Err() == nil {
			s.log.Warn("re-announce queued jobs", "err", err)
		}
	}
}
