package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// watchProviders ends, as provider-lost, the leases of this node's jobs
// whose provider has gone silent: no offer heartbeat, no message and no
// connection for ProviderLostAfter. The record of held time is the last
// receipt both signed; the job keeps the last checkpoint it pulled, and a
// declaration that asks for it is resumed from there at once.
func (n *Node) watchProviders(ctx context.Context) {
	tick := time.NewTicker(min(n.cfg.ProviderLostAfter/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, id := range n.silentProviders(now) {
				n.providerLost(ctx, id, now)
			}
			n.requeueUnconfirmed(now)
		}
	}
}

// silentProviders lists this node's leased jobs whose provider has not been
// heard from for ProviderLostAfter.
func (n *Node) silentProviders(now time.Time) []string {
	type leased struct {
		id       string
		provider string
		last     time.Time
	}
	var jobs []leased
	n.mu.Lock()
	joined := n.joined
	n.mu.Unlock()
	if joined.IsZero() {
		// This node has heard no provider since it started: it is the one
		// cut off, not the providers.
		return nil
	}
	n.mu.Lock()
	for _, j := range n.jobs {
		if j.Lease == nil || j.terminal() {
			continue
		}
		// After a restart, silence counts from when this node rejoined.
		last := j.lastContact
		if last.Before(joined) {
			last = joined
		}
		jobs = append(jobs, leased{j.ID, j.Lease.Terms.Provider, last})
	}
	n.mu.Unlock()
	var out []string
	for _, j := range jobs {
		p, err := peer.Decode(j.provider)
		if err != nil {
			continue
		}
		last := j.last
		if e, ok := n.offers.get(j.provider); ok && e.lastSeen.After(last) {
			last = e.lastSeen
		}
		// A connection proves nothing: a QUIC connection to a killed peer
		// looks alive until it idles out. Only a heartbeat or a message does.
		if p == n.self {
			last = now
		}
		if now.Sub(last) > n.cfg.ProviderLostAfter {
			out = append(out, j.id)
		} else {
			n.touch(j.id, last)
		}
	}
	return out
}

// touch records that a job's provider was heard from at t.
func (n *Node) touch(job string, t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if j, ok := n.jobs[job]; ok && t.After(j.lastContact) {
		j.lastContact = t
	}
}

// providerLost ends a job's lease on the submitter's side.
func (n *Node) providerLost(ctx context.Context, id string, now time.Time) {
	n.mu.Lock()
	j, ok := n.jobs[id]
	if !ok || j.terminal() || j.Lease == nil {
		n.mu.Unlock()
		return
	}
	t := j.Lease.Terms
	silent := now.Sub(j.lastContact).Round(time.Second)
	j.State = stateReleased
	j.Outcome, j.Attribution = ledger.OutcomeProviderLost, ledger.AttributionProvider
	j.Reason = fmt.Sprintf("provider %s silent for %s", t.Provider, silent)
	j.step(stepRelease, now)
	err := n.state.put(prefixJob, id, j)
	n.mu.Unlock()
	if err != nil {
		n.log.Error("persist job", "job", id, "err", err)
	}
	n.log.Warn("provider lost", "job", id, "lease", t.ID, "provider", t.Provider, "silent", silent)

	// Everyone's view frees the lease, as it would on the provider's own
	// release; the held time on record is the last countersigned receipt.
	var heldMs int64
	if es, err := n.ledger.ByLease(ctx, t.ID); err == nil && len(es) > 0 {
		heldMs = es[len(es)-1].Receipt.Held().Milliseconds()
	}
	body := releaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, HeldMs: heldMs, At: now.UnixMilli()}
	if _, err := n.gossip.Publish(ctx, p2p.TopicJobs, kindRelease, body); err != nil {
		n.log.Warn("announce provider-lost release", "lease", t.ID, "err", err)
	}
	n.autoResume(ctx, id)
}

// autoResume resubmits a job lost with its provider, from its last
// checkpoint (or from the start, if none was taken), when its declaration
// asks for it and its resumes are not used up.
func (n *Node) autoResume(ctx context.Context, id string) {
	n.mu.Lock()
	j, ok := n.jobs[id]
	want := ok && j.Outcome == ledger.OutcomeProviderLost && !j.Resumed &&
		j.Declaration.Output.Checkpoints != nil && j.Declaration.Output.Checkpoints.Resume == market.ResumeAuto &&
		j.Resumes < j.Declaration.Output.Checkpoints.MaxResumes
	if want {
		j.Resumed = true
		_ = n.state.put(prefixJob, id, j)
	}
	n.mu.Unlock()
	if !want {
		return
	}
	r, err := n.submit(ctx, nil, id, nil)
	if err != nil {
		n.log.Warn("automatic resume", "job", id, "err", err)
		return
	}
	n.log.Info("resumed after losing its provider", "job", id, "as", r.ID)
}

// requeueUnconfirmed puts back in the queue a job whose lease this node
// countersigned but that its provider never announced: the countersignature
// was lost on the way, or the provider crashed before it recorded the lease.
// The provider never held the GPUs for it, so nothing is owed.
func (n *Node) requeueUnconfirmed(now time.Time) {
	wait := 2*n.cfg.ProposalTTL + 3*n.cfg.Heartbeat
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, j := range n.jobs {
		if j.State != stateRenting || j.Lease == nil || j.Withdrawn {
			continue
		}
		if now.Sub(stepAt(j.Steps, stepRent)) < wait || !j.LastReceipt.IsZero() {
			continue
		}
		if _, _, ok := n.view.leaseParties(j.Lease.Terms.ID); ok {
			continue
		}
		n.log.Warn("lease never announced by its provider: back in the queue", "job", j.ID, "lease", j.Lease.Terms.ID)
		j.State = stateQueued
		j.Lease = nil
		j.Steps = slices.DeleteFunc(j.Steps, func(s api.Step) bool { return s.Step != stepSubmit })
		_ = n.state.put(prefixJob, j.ID, j)
	}
}
