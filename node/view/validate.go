package view

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// JobChecks are the checks of the jobs topic's messages that need what a
// view holds. They keep no state of their own: each asks the Market, under
// its lock, and the Market and the topic's scope are all they hold
// (immutable).
type JobChecks struct {
	market *Market
	// scope is the part of the market whose jobs topic is checked: in a
	// class scope a declaration must name it (wire.CheckMarket).
	scope p2p.Shard
}

// NewJobChecks returns the checks of the jobs topic against m.
func NewJobChecks(m *Market) JobChecks { return JobChecks{market: m} }

// In returns the checks of the jobs topic of scope.
func (c JobChecks) In(scope p2p.Shard) JobChecks {
	c.scope = scope
	return c
}

// Validate is the body validator of the jobs topic: the stateless checks
// of wire.ValidateJobMessage, plus those that need the view: a withdrawal
// of a known job must be signed by that job's submitter, a release of a
// known lease must name its parties (one of whom signed it), and a lease
// must name its job's declarer as the submitter.
func (c JobChecks) Validate(s p2p.Signed) error {
	v := c.market
	if s.Message.Kind == wire.KindRequeue {
		known, err := c.unwanted(s)
		if err != nil {
			return err
		}
		// Declarations this node verified when they arrived are not
		// verified again.
		decls, err := wire.CheckRequeueKnown(s, func(raw []byte, _ peer.ID) bool { return known[sha256.Sum256(raw)] })
		if err != nil {
			return err
		}
		return c.inScope(decls)
	}
	if s.Message.Kind == wire.KindDeclaration && v.Refuses(s.Signer, time.Now()) {
		return fmt.Errorf("%w: the view is full and %s first in line to be evicted", p2p.ErrUnwanted, s.Signer)
	}
	if err := wire.ValidateJobMessage(s); err != nil {
		return err
	}
	switch s.Message.Kind {
	case wire.KindDeclaration:
		return c.inScope([]p2p.Signed{s})
	case wire.KindRelease:
		var b wire.ReleaseBody
		_ = s.Decode(&b) // decoded by wire.ValidateJobMessage already
		if prov, sub, ok := v.LeaseParties(b.Lease); ok {
			if b.Provider != prov || b.Submitter != sub {
				return fmt.Errorf("%w: release of lease %s names parties %s and %s, the lease %s and %s", p2p.ErrForged, b.Lease, b.Provider, b.Submitter, prov, sub)
			}
		}
	case wire.KindLease:
		var l wire.SignedLease
		_ = s.Decode(&l)
		if sub, ok := v.SubmitterOf(l.Terms.Job); ok && sub.String() != l.Terms.Submitter {
			return fmt.Errorf("%w: lease of job %s names submitter %s, not its declarer %s", p2p.ErrForged, l.Terms.Job, l.Terms.Submitter, sub)
		}
	case wire.KindTaskBatch:
		var b wire.TaskBatchBody
		_ = s.Decode(&b)
		for _, l := range b.Leases {
			if sub, ok := v.SubmitterOf(l.Terms.Job); ok && sub != s.Signer {
				return fmt.Errorf("%w: task batch by %s carries a lease of job %s, declared by %s", p2p.ErrForged, s.Signer, l.Terms.Job, sub)
			}
		}
		for _, r := range b.Releases {
			if prov, sub, ok := v.LeaseParties(r.Lease); ok && (r.Provider != prov || r.Submitter != sub) {
				return fmt.Errorf("%w: release of lease %s names parties %s and %s, the lease %s and %s", p2p.ErrForged, r.Lease, r.Provider, r.Submitter, prov, sub)
			}
		}
	case wire.KindWithdrawal:
		var b wire.WithdrawalBody
		_ = s.Decode(&b)
		if sub, ok := v.SubmitterOf(b.Job); ok && sub != s.Signer {
			return fmt.Errorf("%w: withdrawal of job %s signed by %s, not its submitter %s", p2p.ErrForged, b.Job, s.Signer, sub)
		}
	}
	return nil
}

// unwanted refuses a requeue that brings a declaration the view does not
// hold from a signer its bounds would refuse anything more of (Refuses):
// the flood of a Sybil over its share, re-announcing what was refused,
// costs then a hash a declaration rather than a signature check, and goes
// no further. A requeue of declarations all held passes: it only keeps
// them from going stale. It returns the hashes of those the view holds,
// as declared by the requeue's signer, looked up under one lock: a
// flood's requeues are validated many at once, and a lock taken for each
// declaration they carry would be held in turns by all of them.
func (c JobChecks) unwanted(s p2p.Signed) (map[[32]byte]bool, error) {
	v := c.market
	var b wire.RequeueBody
	if s.Decode(&b) != nil {
		return nil, nil // CheckRequeueKnown says what is wrong with it
	}
	hashes := make([][32]byte, len(b.Declarations))
	for i, raw := range b.Declarations {
		hashes[i] = sha256.Sum256(raw)
	}
	known := make(map[[32]byte]bool, len(hashes))
	v.mu.Lock()
	for _, h := range hashes {
		if c.knownLocked(h, s.Signer) {
			known[h] = true
		}
	}
	v.mu.Unlock()
	if len(known) < len(hashes) && v.Refuses(s.Signer, time.Now()) {
		return nil, fmt.Errorf("%w: the view is full and %s first in line to be evicted", p2p.ErrUnwanted, s.Signer)
	}
	return known, nil
}

// knownLocked reports whether the declaration whose hash is h is, byte
// for byte, the signed declaration of a job in the view, declared by
// signer: bytes this node verified when they first arrived. An array's (or
// gang's) declaration is known by its entry. The caller holds
// the Market's mu.
func (c JobChecks) knownLocked(h [32]byte, signer peer.ID) bool {
	v := c.market
	id := wire.JobIDOf(h)
	if a, ok := v.arrays[id]; ok {
		return a.hash == h && a.submitter == signer
	}
	j, ok := v.jobs[id]
	return ok && j.Hash == h && j.Submitter == signer
}

// inScope refuses, in a class scope, any of decls (declarations that
// passed wire's checks; zero for those the view already holds) that does
// not name the scope as its market.
func (c JobChecks) inScope(decls []p2p.Signed) error {
	if c.scope.Class == "" {
		return nil
	}
	for _, d := range decls {
		if d.Raw == nil {
			continue
		}
		var b wire.DeclarationBody
		if err := d.Decode(&b); err != nil {
			return err
		}
		if err := wire.CheckMarket(b, c.scope); err != nil {
			return err
		}
	}
	return nil
}
