package provider

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
)

// LeaseQuery answers what runs on this node's GPUs (GET /v1/leases, e31
// leases): the leases the role holds now, each from its runner, and the
// leases it provided that have ended, from the ledger. What a lease is
// owed is the ledger's one sum, ledger.Policy.Bill under
// ledger.DefaultPolicy (the losers of the verdicts kept not owed), of the
// record its receipts make
// (ledger.LeaseRecord.Counted), so that it agrees with e31 usage and e31
// receipts. A lease whose receipts are open but whose runner is gone (its
// end not yet on record here) is in neither list.
//
// It holds no state of its own: every answer is read when asked, and no
// lock of the role's is held while the ledger is read.
type LeaseQuery struct {
	self   peer.ID       // immutable
	leases *registry     // the role's registry; its own lock
	ledger LeaseLedger   // immutable
	policy ledger.Policy // immutable: ledger.DefaultPolicy
}

// verdictsLedger is a LeaseLedger that keeps verdicts (ledger.Ledger).
type verdictsLedger interface {
	Verdicts(ctx context.Context) ([]ledger.Verdict, error)
}

// billing is the policy leases are billed by: the default, the leases
// that the verdicts kept name losers not owed, where the ledger keeps
// verdicts.
func (q *LeaseQuery) billing(ctx context.Context) (ledger.Policy, error) {
	vl, ok := q.ledger.(verdictsLedger)
	if !ok {
		return q.policy, nil
	}
	vs, err := vl.Verdicts(ctx)
	if err != nil {
		return ledger.Policy{}, fmt.Errorf("verdicts: %w", err)
	}
	return q.policy.WithLost(vs), nil
}

// LeaseLedger is what LeaseQuery reads of the ledger (ledger.Ledger).
type LeaseLedger interface {
	Lease(ctx context.Context, lease string) (ledger.LeaseRecord, error)
	All(ctx context.Context) ([]ledger.Entry, error)
}

// NewLeaseQuery is the query over p's leases, billing from l.
func NewLeaseQuery(p *Provider, l LeaseLedger) *LeaseQuery {
	return &LeaseQuery{self: p.d.Self, leases: p.leases, ledger: l, policy: ledger.DefaultPolicy()}
}

// Live lists the leases not yet released, the oldest first.
func (q *LeaseQuery) Live(ctx context.Context) ([]api.Lease, error) {
	policy, err := q.billing(ctx)
	if err != nil {
		return nil, err
	}
	runners := q.leases.active()
	out := make([]api.Lease, 0, len(runners))
	for _, r := range runners {
		l := liveLease(r)
		lr, err := q.ledger.Lease(ctx, l.ID)
		if err != nil {
			return nil, fmt.Errorf("receipts of lease %s: %w", l.ID, err)
		}
		if c := lr.Counted(); c != nil {
			l.Billed = billed(policy.Bill(c, time.Time{}), c)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b api.Lease) int {
		return cmp.Or(a.HeldSince.Compare(b.HeldSince), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// liveLease is what a lease's runner and record say of it.
func liveLease(r *leaseRunner) api.Lease {
	rec := r.snapshot()
	t := rec.Lease.Terms
	l := api.Lease{
		ID: t.ID, Job: t.Job, Name: rec.Declaration.Name, Submitter: r.submitter.String(),
		GPUs: []api.LeaseGPU{}, CPUs: t.CPUs, MemoryBytes: t.MemoryBytes,
		HeldSince: rec.Start, Limit: api.Seconds((time.Duration(t.Limit) * time.Millisecond).Seconds()),
		Phase: string(rec.State), RunStart: rec.RunStart,
		CheckpointAt: rec.CheckpointAt, Checkpoints: rec.CheckpointN,
	}
	for _, g := range r.gpus {
		l.GPUs = append(l.GPUs, api.LeaseGPU{UUID: g.UUID, Model: g.Model})
	}
	if len(l.GPUs) == 0 {
		for _, id := range t.GPUs {
			l.GPUs = append(l.GPUs, api.LeaseGPU{UUID: id})
		}
	}
	limit := time.Duration(t.Limit) * time.Millisecond
	switch {
	case t.Bound == ledger.BoundRule:
		l.EndsBy = time.UnixMilli(t.Proposed).Add(limit)
	case !rec.RunStart.IsZero():
		l.EndsBy = rec.RunStart.Add(limit)
	}
	return l
}

// billed is a lease's bill b, from its counted record c, for the API.
func billed(b ledger.LeaseBill, c *ledger.Receipt) api.LeaseBilled {
	return api.LeaseBilled{Until: c.HeldUntil, GPUHours: b.GPUHours, OwedGPUHours: b.OwedGPUHours,
		CPUHours: b.CPUHours, OwedCPUHours: b.OwedCPUHours, Own: b.Own}
}

// History lists the leases this node provided that have ended, the
// newest first: at most f.Max (api.DefaultLeaseHistory when 0, never more
// than api.MaxLeaseHistory), of those held at or after f.Since.
func (q *LeaseQuery) History(ctx context.Context, f api.LeasesQuery) ([]api.EndedLease, error) {
	n := f.Max
	if n <= 0 {
		n = api.DefaultLeaseHistory
	}
	n = min(n, api.MaxLeaseHistory)
	es, err := q.ledger.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease history: %w", err)
	}
	policy, err := q.billing(ctx)
	if err != nil {
		return nil, err
	}
	// The ledger's last entry of each lease comes first, so that the
	// leases are read newest first and the scan stops at n.
	seen := map[string]bool{}
	var out []api.EndedLease
	for i := len(es) - 1; i >= 0 && len(out) < n; i-- {
		s := &es[i].Receipt
		if es[i].Dispute != nil {
			s = &es[i].Dispute.Ours
		}
		if s.Provider != q.self || seen[s.Lease] {
			continue
		}
		seen[s.Lease] = true
		if !f.Since.IsZero() && s.HeldUntil.Before(f.Since) {
			continue
		}
		lr, err := q.ledger.Lease(ctx, s.Lease)
		if err != nil {
			return nil, fmt.Errorf("lease history: %w", err)
		}
		c := lr.Counted()
		if c == nil || lr.State == ledger.SettlementOpen || lr.State == ledger.SettlementNone {
			continue // still held, or its end is not on record here
		}
		out = append(out, api.EndedLease{
			ID: c.Lease, Job: c.Job, Submitter: c.Submitter.String(), GPUs: c.GPUs, GPUModel: c.GPUModel,
			HeldFrom: c.HeldFrom, HeldUntil: c.HeldUntil,
			Outcome: string(c.Outcome), Attribution: string(c.Attribution), Record: string(lr.State),
			Billed: billed(policy.Bill(c, time.Time{}), c),
		})
	}
	slices.SortStableFunc(out, func(a, b api.EndedLease) int { return b.HeldUntil.Compare(a.HeldUntil) })
	return out, nil
}
