package ledger

import (
	"errors"
	"fmt"
	"time"
)

// # The held time a lease allows
//
// A lease's terms say when the provider proposed it and the job's limit.
// Terms that carry "bound": 1 (BoundRule) bind both parties to a window of
// held time: nothing before the proposal (less the clock skew allowed
// between peers) and nothing past the proposal plus the limit, the most
// grace a run gets to write a last checkpoint, the time its output may
// take to import and hand over, and the skew. The limit counts from the
// proposal: staging is inside it. A receipt or record claiming time outside
// the window is refused by the submitter before it countersigns, by the
// ledger before it stores, and by Verify and VerifyExport after: a third
// party checks it with the lease evidence alone.
//
// Terms signed before the rule carry no "bound"; their receipts verify as
// they always did, and the reports count them apart (Unbounded), since no
// window can be read from them.

// BoundRule is the value of the terms' "bound" field under which the
// window below holds.
const BoundRule = 1

// Allowances of the window BoundRule sets. They are protocol constants
// rather than either party's settings, so that a third party computes the
// same window from the terms alone.
const (
	// MaxClockSkew is how far two peers' clocks may differ.
	MaxClockSkew = time.Minute
	// MaxGrace is the most a provider may let a run go on after SIGTERM
	// (e31d --grace) to write its last checkpoint.
	MaxGrace = 5 * time.Minute
	// OutputAllowance is what a run's output may take after the run, to be
	// imported and handed to the submitter, held.
	OutputAllowance = 15 * time.Minute
)

// ErrOutsideLease: a receipt or record claims held time the lease's terms
// do not allow.
var ErrOutsideLease = errors.New("held time outside what the lease allows")

// HeldWindow is the held time terms allow, from and until; ok is false for
// terms signed before BoundRule, which allow any.
func (t LeaseTerms) HeldWindow() (from, until time.Time, ok bool) {
	if t.Bound != BoundRule {
		return time.Time{}, time.Time{}, false
	}
	from = t.Proposed.Add(-MaxClockSkew)
	until = t.Proposed.Add(t.Limit + MaxGrace + OutputAllowance + MaxClockSkew)
	return from, until, true
}

// CheckHeld checks r against the lease terms t it claims to be under: the
// lease, job, parties, GPU count, and the CPUs and memory where r names
// them, and, for bounded terms, the held time they allow. It returns
// ErrOutsideLease, wrapped, for held time outside the window, and
// ErrInvalidReceipt for terms of another lease.
func CheckHeld(r *Receipt, t LeaseTerms) error {
	switch {
	case t.ID != r.Lease:
		return fmt.Errorf("%w: lease evidence is for lease %q, not %q", ErrInvalidReceipt, t.ID, r.Lease)
	case t.Job != r.Job:
		return fmt.Errorf("%w: lease evidence is for job %q, not %q", ErrInvalidReceipt, t.Job, r.Job)
	case t.Provider != r.Provider || t.Submitter != r.Submitter:
		return fmt.Errorf("%w: lease evidence names other parties", ErrInvalidReceipt)
	case t.GPUs != r.GPUs:
		return fmt.Errorf("%w: lease evidence holds %d GPUs, the receipt %d", ErrInvalidReceipt, t.GPUs, r.GPUs)
	}
	if err := checkHeldTerms(r, t); err != nil {
		return err
	}
	from, until, ok := t.HeldWindow()
	if !ok {
		return nil
	}
	if r.HeldFrom.Before(msTime(from)) {
		return fmt.Errorf("%w: held from %s, before the proposal at %s less %s of skew",
			ErrOutsideLease, r.HeldFrom.UTC().Format(time.RFC3339), t.Proposed.UTC().Format(time.RFC3339), MaxClockSkew)
	}
	if r.HeldUntil.After(msTime(until)) {
		return fmt.Errorf("%w: held until %s, past %s (proposed %s + limit %s + grace %s + output %s + skew %s)",
			ErrOutsideLease, r.HeldUntil.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339),
			t.Proposed.UTC().Format(time.RFC3339), t.Limit, MaxGrace, OutputAllowance, MaxClockSkew)
	}
	return nil
}
