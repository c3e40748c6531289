package ledger

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Cause is how a lease ended: its final outcome and who caused it.
type Cause struct {
	Outcome     Outcome     `json:"outcome"`
	Attribution Attribution `json:"attribution"`
}

// Policy says which held time the submitter owes. It is data, so a node can
// show, store or compare the rule it billed by.
type Policy struct {
	// Owed lists the endings whose held time is owed.
	Owed []Cause `json:"owed"`
	// OwedToCheckpoint lists the endings whose held time is owed up to
	// the last checkpoint the final receipt names (CheckpointAt), and not
	// after it: the work kept, not the work lost (checkpointat.go).
	OwedToCheckpoint []Cause `json:"owed_to_checkpoint,omitempty"`
	// OpenOwed says whether the held time of a lease with no final record
	// yet (countersigned interim receipts) is owed so far.
	OpenOwed bool `json:"open_owed"`
	// Lost are the leases whose replicas a verdict named losers: held,
	// never owed. The ledger fills it from the verdicts it keeps (Usage,
	// HeldByJobs), an export's check from the verdicts in the file
	// (VerifyExport); it is not part of the rule shown.
	Lost map[string]bool `json:"-"`
}

// WithLost returns p with the leases vs name as losers added to Lost.
func (p Policy) WithLost(vs []Verdict) Policy {
	lost := maps.Clone(p.Lost)
	if lost == nil {
		lost = map[string]bool{}
	}
	for i := range vs {
		for _, r := range vs[i].Losers() {
			lost[r.Lease] = true
		}
	}
	p.Lost = lost
	return p
}

// Owes reports whether time held under a lease that ended in c is owed.
func (p Policy) Owes(c Cause) bool { return slices.Contains(p.Owed, c) }

// DefaultPolicy is the rule described in the package documentation: what
// the job or its submitter caused is owed (completed, the job's own failure
// or limit, a withdrawal); what the provider or the network caused is not
// (provider-lost, output-lost, failures by the provider or in staging),
// but for a lease preempted by its provider, owed up to its last
// checkpoint, which the job goes on from. Queued time is never held, so
// never on a receipt and never owed.
func DefaultPolicy() Policy {
	p := Policy{OpenOwed: true, OwedToCheckpoint: []Cause{{OutcomePreempted, AttributionProvider}}}
	for _, o := range outcomes() {
		for _, a := range []Attribution{AttributionJob, AttributionSubmitter} {
			p.Owed = append(p.Owed, Cause{o, a})
		}
	}
	return p
}

// UsageFilter narrows Usage. The zero value counts everything.
type UsageFilter struct {
	// Since cuts each lease's held time at this instant; zero counts all.
	Since time.Time
	// Peer keeps only leases with this counterpart; empty keeps all.
	Peer peer.ID
	// Job keeps only leases of the jobs it accepts (one job, or every task
	// of an array); nil keeps all.
	Job func(job string) bool
}

// UsageRow is the held time of the leases that share every key field.
type UsageRow struct {
	Peer     peer.ID `json:"peer"`      // the counterpart
	Role     string  `json:"role"`      // the role Peer played: RoleProvider or RoleSubmitter
	GPUModel string  `json:"gpu_model"` // "" where receipts do not name it
	// Outcome and Attribution are "" for a lease with no final record.
	Outcome     Outcome     `json:"outcome"`
	Attribution Attribution `json:"attribution"`
	// Basis is how the counted record stands: two-sided, one-sided,
	// disputed (this node's version counted) or open.
	Basis Settlement `json:"basis"`
	// LostVerification says a verdict named these leases' replicas
	// losers: held, not owed (Policy.Lost).
	LostVerification bool    `json:"lost_verification,omitempty"`
	Leases           int     `json:"leases"`
	GPUHours         float64 `json:"gpu_hours"`
	// Owed says whether any of GPUHours is owed, OwedGPUHours how much:
	// all of it but for endings owed up to their last checkpoint.
	Owed         bool    `json:"owed"`
	OwedGPUHours float64 `json:"owed_gpu_hours"`
	// CPUHours, MemoryGiBHours and DiskGiBHours are what the leases held
	// beside their GPUs, by the receipts that say (held.go), and
	// OwedCPUHours the part of CPUHours owed, as for GPUs.
	CPUHours       float64 `json:"cpu_hours"`
	OwedCPUHours   float64 `json:"owed_cpu_hours"`
	MemoryGiBHours float64 `json:"memory_gib_hours"`
	DiskGiBHours   float64 `json:"disk_gib_hours"`
}

// UsageTotal sums rows for one counterpart in one role, or for one GPU
// model (Peer and Role empty).
type UsageTotal struct {
	Peer     peer.ID `json:"peer,omitempty"`
	Role     string  `json:"role,omitempty"`
	GPUModel string  `json:"gpu_model,omitempty"`
	GPUHours float64 `json:"gpu_hours"`
	Owed     float64 `json:"owed_gpu_hours"`
	// NotOwed is GPUHours less Owed.
	NotOwed float64 `json:"not_owed_gpu_hours"`
	// OneSided is the part of GPUHours that rests on one-sided records or
	// disputed versions: one party's word.
	OneSided float64 `json:"one_sided_gpu_hours"`
	// Lost is the part of NotOwed held by replicas a verdict named
	// losers.
	Lost float64 `json:"lost_verification_gpu_hours,omitempty"`
	// CPUHours, OwedCPUHours, MemoryGiBHours and DiskGiBHours sum the
	// rows' (UsageRow).
	CPUHours       float64 `json:"cpu_hours"`
	OwedCPUHours   float64 `json:"owed_cpu_hours"`
	MemoryGiBHours float64 `json:"memory_gib_hours"`
	DiskGiBHours   float64 `json:"disk_gib_hours"`
}

// UsageReport is what Usage returns. Rows are sorted by every key field.
type UsageReport struct {
	Policy  Policy       `json:"policy"`
	Rows    []UsageRow   `json:"rows"`
	ByPeer  []UsageTotal `json:"by_peer"`  // sorted by peer, then role
	ByModel []UsageTotal `json:"by_model"` // sorted by model
	// Total sums every lease the report counts, each once whatever rows
	// it is on: held, owed and not owed (Policy.Bill).
	Total HeldSum `json:"total"`
}

// Usage sums the GPU-hours held under leases, per counterpart and GPU
// model, split by how each lease ended, and what policy makes owed; and
// beside them the CPU-hours and the GiB-hours of memory and disk, where
// receipts name them, so that a job without GPUs shows what it held. Each
// lease counts once, by the record LeaseRecord.Counted names, so a
// superseded one-sided record is never added to the receipt that settled
// it. Options.Self is left out as a counterpart, but for its own jobs on
// its own GPUs, counted under its own ID in RoleSelf and never owed.
func (l *Ledger) Usage(ctx context.Context, f UsageFilter, policy Policy) (UsageReport, error) {
	es, err := l.All(ctx)
	if err != nil {
		return UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	rep := UsageReport{Policy: policy}
	if policy, err = l.withLost(ctx, policy); err != nil {
		return UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	type key struct {
		peer        peer.ID
		role, model string
		outcome     Outcome
		attribution Attribution
		basis       Settlement
		lost        bool
	}
	rows := map[key]*UsageRow{}
	for _, lr := range settledLeases(es) {
		r := lr.Counted()
		if r == nil || (f.Job != nil && !f.Job(r.Job)) {
			continue
		}
		b := policy.Bill(r, f.Since)
		counted := false
		sides := []struct {
			id   peer.ID
			role string
		}{{r.Provider, RoleProvider}, {r.Submitter, RoleSubmitter}}
		if b.Own && r.Provider == l.self {
			// This node's own job on its own GPUs: held, owed by no one
			// (Policy.Bill).
			sides = sides[:1]
			sides[0].role = RoleSelf
		}
		for _, side := range sides {
			if (side.id == l.self && side.role != RoleSelf) || (f.Peer != "" && side.id != f.Peer) {
				continue
			}
			if side.role == RoleSubmitter && r.Submitter == r.Provider {
				continue
			}
			k := key{side.id, side.role, r.GPUModel, r.Outcome, r.Attribution, lr.State, b.Lost}
			row := rows[k]
			if row == nil {
				row = &UsageRow{Peer: k.peer, Role: k.role, GPUModel: k.model, Outcome: k.outcome,
					Attribution: k.attribution, Basis: k.basis, LostVerification: k.lost, Owed: b.Owed}
				rows[k] = row
			}
			counted = true
			row.Leases++
			row.GPUHours += b.GPUHours
			row.OwedGPUHours += b.OwedGPUHours
			row.CPUHours += b.CPUHours
			row.OwedCPUHours += b.OwedCPUHours
			row.MemoryGiBHours += b.MemoryGiBHours
			row.DiskGiBHours += b.DiskGiBHours
		}
		if counted {
			rep.Total.Add(b, lr.State == SettlementOneSided || lr.State == SettlementDisputed)
		}
	}
	rep.Rows = make([]UsageRow, 0, len(rows))
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	slices.SortFunc(rep.Rows, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Role, b.Role), cmp.Compare(a.GPUModel, b.GPUModel),
			cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Attribution, b.Attribution), cmp.Compare(a.Basis, b.Basis),
			boolOrder(a.LostVerification, b.LostVerification))
	})
	rep.ByPeer = totals(rep.Rows, func(r *UsageRow) UsageTotal { return UsageTotal{Peer: r.Peer, Role: r.Role} })
	rep.ByModel = totals(rep.Rows, func(r *UsageRow) UsageTotal { return UsageTotal{GPUModel: r.GPUModel} })
	return rep, nil
}

// totals sums sorted rows into the groups key names, in first-seen order
// of a sort by the key.
func totals(rows []UsageRow, key func(*UsageRow) UsageTotal) []UsageTotal {
	var out []UsageTotal
	for i := range rows {
		r := &rows[i]
		k := key(r)
		j := slices.IndexFunc(out, func(t UsageTotal) bool {
			return t.Peer == k.Peer && t.Role == k.Role && t.GPUModel == k.GPUModel
		})
		if j < 0 {
			out = append(out, k)
			j = len(out) - 1
		}
		t := &out[j]
		t.GPUHours += r.GPUHours
		t.Owed += r.OwedGPUHours
		t.NotOwed += r.GPUHours - r.OwedGPUHours
		t.CPUHours += r.CPUHours
		t.OwedCPUHours += r.OwedCPUHours
		t.MemoryGiBHours += r.MemoryGiBHours
		t.DiskGiBHours += r.DiskGiBHours
		if r.Basis == SettlementOneSided || r.Basis == SettlementDisputed {
			t.OneSided += r.GPUHours
		}
		if r.LostVerification {
			t.Lost += r.GPUHours
		}
	}
	slices.SortFunc(out, func(a, b UsageTotal) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Role, b.Role), cmp.Compare(a.GPUModel, b.GPUModel))
	})
	return out
}

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// heldSince is the part of r's held interval at or after since.
func heldSince(r *Receipt, since time.Time) time.Duration {
	from, until := msTime(r.HeldFrom), msTime(r.HeldUntil)
	if !since.IsZero() && from.Before(since) {
		from = since
	}
	if until.Before(from) {
		return 0
	}
	return until.Sub(from)
}

// settledLeases groups entries by lease, in the order each lease first
// appears, and settles each.
func settledLeases(es []Entry) []*LeaseRecord {
	byName := map[string]*LeaseRecord{}
	var out []*LeaseRecord
	for _, e := range es {
		name := e.subject().Lease
		lr := byName[name]
		if lr == nil {
			lr = &LeaseRecord{Lease: name}
			byName[name] = lr
			out = append(out, lr)
		}
		lr.add(e)
	}
	for _, lr := range out {
		lr.settle()
	}
	return out
}

// JobHeld is what the leases of a set of jobs held: the attempts of one
// job as its submitter sees it.
type JobHeld struct {
	HeldSum
	Providers []peer.ID `json:"providers"` // in first-held order
}

// HeldByJobs sums the held time of the leases of the given jobs, each
// lease counted once by the record LeaseRecord.Counted names and billed by
// Policy.Bill, as Usage counts it.
func (l *Ledger) HeldByJobs(ctx context.Context, policy Policy, jobs ...string) (JobHeld, error) {
	var out JobHeld
	policy, err := l.withLost(ctx, policy)
	if err != nil {
		return JobHeld{}, err
	}
	for _, job := range jobs {
		ls, err := l.countedLeases(ctx, job)
		if err != nil {
			return JobHeld{}, err
		}
		for i := range ls {
			r := &ls[i].r
			out.Add(policy.Bill(r, time.Time{}), ls[i].oneSided)
			if !slices.Contains(out.Providers, r.Provider) {
				out.Providers = append(out.Providers, r.Provider)
			}
		}
	}
	return out, nil
}
