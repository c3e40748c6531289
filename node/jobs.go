package node

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// validateJobMessage is the body validator of the jobs topic: the stateless
// checks, plus those that need the view: a withdrawal of a known job must be
// signed by that job's submitter, and a release of a known lease must name
// its parties (one of whom signed it).
func (n *Node) validateJobMessage(s p2p.Signed) error {
	if err := validateJobMessage(s); err != nil {
		return err
	}
	if s.Message.Kind == kindRelease {
		var b releaseBody
		_ = s.Decode(&b)
		if prov, sub, ok := n.view.leaseParties(b.Lease); ok {
			if b.Provider != prov || b.Submitter != sub {
				return fmt.Errorf("%w: release of lease %s names parties %s and %s, the lease %s and %s", p2p.ErrForged, b.Lease, b.Provider, b.Submitter, prov, sub)
			}
		}
	}
	if s.Message.Kind == kindLease {
		var l SignedLease
		_ = s.Decode(&l)
		if sub, ok := n.view.submitterOf(l.Terms.Job); ok && sub.String() != l.Terms.Submitter {
			return fmt.Errorf("%w: lease of job %s names submitter %s, not its declarer %s", p2p.ErrForged, l.Terms.Job, l.Terms.Submitter, sub)
		}
	}
	if s.Message.Kind == kindWithdrawal {
		var b withdrawalBody
		_ = s.Decode(&b)
		if sub, ok := n.view.submitterOf(b.Job); ok && sub != s.Signer {
			return fmt.Errorf("%w: withdrawal of job %s signed by %s, not its submitter %s", p2p.ErrForged, b.Job, s.Signer, sub)
		}
	}
	return nil
}

// receiveJobs applies every accepted message of the jobs topic to the view,
// and to this node's own jobs and leases where they are concerned.
func (n *Node) receiveJobs(ctx context.Context, sub *p2p.Subscription) {
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		switch s.Message.Kind {
		case kindDeclaration:
			var b declarationBody
			if s.Decode(&b) != nil {
				continue
			}
			id := jobID(s)
			if n.view.addJob(&openJob{id: id, submitter: s.Signer, body: b, raw: s.Raw, seen: now}) {
				n.log.Debug("job declared", "job", id, "submitter", s.Signer)
				n.learnAddrsOnly(s.Signer, b.Addrs)
			}
		case kindRequeue:
			decls, err := checkRequeue(s)
			if err != nil {
				continue
			}
			for _, d := range decls {
				var b declarationBody
				if d.Decode(&b) != nil {
					continue
				}
				n.view.addJob(&openJob{id: jobID(d), submitter: d.Signer, body: b, raw: d.Raw, seen: now})
			}
		case kindWithdrawal:
			var b withdrawalBody
			if s.Decode(&b) != nil {
				continue
			}
			if sub, ok := n.view.submitterOf(b.Job); ok && sub != s.Signer {
				continue // counted as forged by the validator
			}
			n.view.closeJob(b.Job, s.Signer, now)
			n.withdrawLease(b.Job, s.Signer)
		case kindLease:
			var l SignedLease
			if s.Decode(&l) != nil {
				continue
			}
			if n.view.addLease(l, now) {
				n.log.Debug("lease announced", "lease", l.Terms.ID, "job", l.Terms.Job, "provider", l.Terms.Provider)
			}
		case kindRelease:
			var r releaseBody
			if s.Decode(&r) != nil {
				continue
			}
			n.view.releaseLease(r, s.Signer, now)
			n.log.Debug("lease released", "lease", r.Lease, "outcome", r.Outcome)
		}
	}
}

// epochOf returns the epoch number of t and its start.
func (n *Node) epochOf(t time.Time) (uint64, time.Time) {
	e := n.cfg.Epoch.Milliseconds()
	num := t.UnixMilli() / e
	return uint64(num), time.UnixMilli(num * e)
}

// matchLoop runs Match once an epoch, on the view frozen at the epoch's
// start minus the gossip delay, and acts on what concerns this node: as a
// provider it proposes the leases Match assigned to it; as a submitter it
// records why its jobs wait.
func (n *Node) matchLoop(ctx context.Context) {
	for {
		_, start := n.epochOf(time.Now())
		next := start.Add(n.cfg.Epoch)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		epoch, start := n.epochOf(next)
		cutoff := start.Add(-n.cfg.EpochDelay)
		n.prune()
		v := n.view.snapshot(epoch, start, cutoff, n.offers.at(cutoff))
		if len(v.Jobs) == 0 {
			continue
		}
		res := market.Match(v, market.Options{})
		n.recordWaits(res)
		n.recordMatch(api.Match{Epoch: epoch, ViewHash: res.ViewHash, Jobs: len(v.Jobs), Assignments: res.Assignments})
		for _, a := range res.Assignments {
			if a.Provider == n.self.String() {
				n.propose(ctx, a, epoch, res.ViewHash)
			}
		}
	}
}

// prune forgets what no longer matters: closed jobs and released leases
// after an hour, open jobs not re-announced for ten heartbeats (a submitter
// re-announces every requeueEvery), withdrawals after an hour.
func (n *Node) prune() {
	now := time.Now()
	n.view.prune(now, time.Hour, max(10*n.cfg.Heartbeat, 3*requeueEvery*n.cfg.Heartbeat))
	n.mu.Lock()
	defer n.mu.Unlock()
	for job, w := range n.withdrawn {
		if now.Sub(w.at) > time.Hour {
			delete(n.withdrawn, job)
		}
	}
}

// matchHistory is how many recent Match results the node keeps for
// inspection (GET /v1/matches).
const matchHistory = 64

func (n *Node) recordMatch(m api.Match) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.matches = append(n.matches, m)
	if len(n.matches) > matchHistory {
		n.matches = n.matches[len(n.matches)-matchHistory:]
	}
}

// recordWaits keeps, for this node's queued jobs, the reason Match gave.
func (n *Node) recordWaits(res market.Result) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range res.Waiting {
		if j, ok := n.jobs[w.Job]; ok && j.State == stateQueued {
			j.Wait = w.Reason
		}
	}
	for _, a := range res.Assignments {
		if j, ok := n.jobs[a.Job]; ok && j.State == stateQueued {
			j.Wait = "matched to provider " + a.Provider + "; waiting for its proposal"
		}
	}
}

// learnAddrsOnly records a peer's addresses without dialling it.
func (n *Node) learnAddrsOnly(p peer.ID, addrs []string) {
	if p == n.self {
		return
	}
	if info, ok := addrInfo(p, addrs); ok {
		n.host.Peerstore().AddAddrs(p, info.Addrs, peerAddrTTL)
	}
}
