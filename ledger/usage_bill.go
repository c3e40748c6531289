package ledger

import (
	"time"
)

// LeaseBill is what one lease held and the part of it a policy makes
// owed. Policy.Bill makes it, and every figure of held and owed time this
// package gives (Usage, HeldByJobs, SumEntries, VerifyExport) adds up
// LeaseBills, so that the figures agree wherever they are shown.
type LeaseBill struct {
	// Held is the lease's held time (since the cut asked for).
	Held time.Duration
	// GPUHours and CPUHours are the GPUs and CPUs held times Held;
	// OwedGPUHours and OwedCPUHours the part owed.
	GPUHours, OwedGPUHours float64
	CPUHours, OwedCPUHours float64
	// MemoryGiBHours and DiskGiBHours are what the lease held beside its
	// GPUs, where its receipt says (held.go).
	MemoryGiBHours, DiskGiBHours float64
	// Owed says whether any of the held time is owed: all of it, but for
	// an ending owed up to its last checkpoint.
	Owed bool
	// Own says the lease is its submitter's own job on its own GPUs: held,
	// owed by no one, whatever its ending.
	Own bool
	// Lost says a verdict named the lease's replica a loser: its held
	// time is not owed (Policy.Lost).
	Lost bool
}

// Bill is what the lease whose counted record is r held from since (zero:
// all of it), and what p makes owed of it. This is the one place the rule
// for a node's own job on its own GPUs is applied (the package
// documentation states it): a record whose provider is its submitter is
// held and never owed; and of the rule for replicas that lost a
// verification: a lease in p.Lost is held and not owed, whatever its
// ending.
func (p Policy) Bill(r *Receipt, since time.Time) LeaseBill {
	held, owedHeld := heldSince(r, since), p.owedHeld(r, since)
	b := LeaseBill{
		Held:           held,
		GPUHours:       held.Hours() * float64(r.GPUs),
		OwedGPUHours:   owedHeld.Hours() * float64(r.GPUs),
		CPUHours:       held.Hours() * float64(r.CPUs),
		OwedCPUHours:   owedHeld.Hours() * float64(r.CPUs),
		MemoryGiBHours: held.Hours() * gib(r.MemoryBytes),
		DiskGiBHours:   held.Hours() * gib(r.DiskBytes),
		Owed:           p.OpenOwed,
	}
	if r.Final {
		c := Cause{r.Outcome, r.Attribution}
		b.Owed = p.Owes(c) || p.owesToCheckpoint(c)
	}
	if r.Provider != "" && r.Provider == r.Submitter {
		b.Own, b.Owed, b.OwedGPUHours, b.OwedCPUHours = true, false, 0, 0
	}
	if p.Lost[r.Lease] {
		b.Lost, b.Owed, b.OwedGPUHours, b.OwedCPUHours = true, false, 0, 0
	}
	return b
}

// HeldSum adds up the bills of a set of leases: held, owed and not owed,
// in GPU-hours and CPU-hours.
type HeldSum struct {
	Leases int `json:"leases"`
	// Held is the leases' held time, summed.
	Held            time.Duration `json:"held"`
	GPUHours        float64       `json:"gpu_hours"`
	OwedGPUHours    float64       `json:"owed_gpu_hours"`
	NotOwedGPUHours float64       `json:"not_owed_gpu_hours"`
	// OneSidedGPUHours is the part of GPUHours that rests on one party's
	// word (a one-sided record, or this node's version of a dispute).
	OneSidedGPUHours float64 `json:"one_sided_gpu_hours"`
	CPUHours         float64 `json:"cpu_hours"`
	OwedCPUHours     float64 `json:"owed_cpu_hours"`
	// LostGPUHours is the part of NotOwedGPUHours held by replicas a
	// verdict named losers (Policy.Lost): what failed verification cost.
	LostGPUHours float64 `json:"lost_verification_gpu_hours,omitempty"`
}

// Add counts one lease's bill; oneSided says its record rests on one
// party's word.
func (s *HeldSum) Add(b LeaseBill, oneSided bool) {
	s.Leases++
	s.Held += b.Held
	s.GPUHours += b.GPUHours
	s.OwedGPUHours += b.OwedGPUHours
	s.NotOwedGPUHours += b.GPUHours - b.OwedGPUHours
	s.CPUHours += b.CPUHours
	s.OwedCPUHours += b.OwedCPUHours
	if oneSided {
		s.OneSidedGPUHours += b.GPUHours
	}
	if b.Lost {
		s.LostGPUHours += b.GPUHours
	}
}

// SumEntries sums the leases of entries under p, each counted once by the
// record LeaseRecord.Counted names, as Usage counts it; keep, when not
// nil, selects the leases by their job. It reads entries alone, so it sums
// an export file (VerifyExport) as the ledger that wrote it would.
func SumEntries(es []Entry, p Policy, keep func(job string) bool) HeldSum {
	var s HeldSum
	for _, lr := range settledLeases(es) {
		r := lr.Counted()
		if r == nil || (keep != nil && !keep(r.Job)) {
			continue
		}
		s.Add(p.Bill(r, time.Time{}), lr.State == SettlementOneSided || lr.State == SettlementDisputed)
	}
	return s
}
