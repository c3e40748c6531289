package rogue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
)

// The attacks of a rogue submitter on honest providers.

// NoCountersignOptions shape NeverCountersign.
type NoCountersignOptions struct {
	// Job is what an honest provider takes: a run longer than a few
	// receipt intervals shows whether the provider stops it early.
	Job market.Declaration
	// Probe is declared once the lease has ended, to see whether the
	// provider proposes for this submitter's jobs again.
	Probe market.Declaration
	// Policy is how receipts go unsigned: Refuse (default) or Ignore.
	Policy ReceiptPolicy
	// Within bounds the wait for the lease, and then for its end;
	// default 2m each.
	Within time.Duration
	// ProbeFor is how long the probe waits for a proposal; default 5s.
	ProbeFor time.Duration
}

func (o NoCountersignOptions) withDefaults() NoCountersignOptions {
	if o.Policy == Countersign {
		o.Policy = Refuse
	}
	orDefault(&o.Within, 2*time.Minute)
	orDefault(&o.ProbeFor, 5*time.Second)
	return o
}

// NeverCountersign declares o.Job as a submitter, countersigns the lease
// an honest provider proposes, and then answers none of its receipts
// (o.Policy): not one is countersigned, the final one neither. Held is how
// long the provider held its GPUs for the lease: from the
// countersignature until its final receipt or release, whichever the
// rogue saw first. Then it declares o.Probe and counts the proposals
// that come within o.ProbeFor; the probe declines them all, and is
// withdrawn after.
func (r *Rogue) NeverCountersign(ctx context.Context, o NoCountersignOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackNoCountersign}
	r.Serve(SubmitterPolicy{Receipts: o.Policy})
	j, err := r.Declare(ctx, o.Job, true)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.Within)
	defer cancel()
	if err := r.waitSubmitting(wctx, func(s *submitting) bool { return s.liveLeaseLocked(j.ID) != nil }); err != nil {
		return res, fmt.Errorf("rogue: no honest provider leased job %s: %w", j.ID, err)
	}
	res.Steps = append(res.Steps, Step{What: "lease", Answer: Countersigned})
	lease := r.Leases(j.ID)[0]
	ended := func() (time.Time, string, bool) {
		l := r.Leases(j.ID)[0]
		if l.Final != nil {
			return l.FinalAt, fmt.Sprintf("final receipt %s/%s (%s)", l.Final.Outcome, l.Final.Attribution, l.Final.Reason), true
		}
		if _, ok := r.Released(l.Lease.Terms.ID); ok {
			return time.Now(), "released", true
		}
		return time.Time{}, "", false
	}
	ectx, cancel := context.WithTimeout(ctx, o.Within)
	defer cancel()
	var end time.Time
	var how string
	for {
		var ok bool
		if end, how, ok = ended(); ok {
			break
		}
		if err := task.Sleep(ectx, 20*time.Millisecond); err != nil {
			return res, fmt.Errorf("rogue: lease %s of job %s still held %s after it was signed", lease.Lease.Terms.ID, j.ID, o.Within)
		}
	}
	l := r.Leases(j.ID)[0]
	res.Held = end.Sub(l.Countersigned)
	for range l.Refused {
		res.Steps = append(res.Steps, Step{What: "receipt", Answer: Refused, Err: "not signed by the rogue"})
	}
	res.note("the provider held the GPUs %s, then: %s", res.Held.Round(100*time.Millisecond), how)

	p, err := r.Declare(ctx, o.Probe, false)
	if err != nil {
		return res, err
	}
	_ = task.Sleep(ctx, o.ProbeFor)
	n := r.Proposals(p.ID)
	res.Steps = append(res.Steps, Step{What: "proposals for its next job", Answer: Counted, Count: n, Err: fmt.Sprintf("%d in %s", n, o.ProbeFor)})
	if err := r.Withdraw(ctx, p.ID); err != nil {
		return res, err
	}
	return res, nil
}

// WithholdOptions shape WithholdGangLease.
type WithholdOptions struct {
	// Gang is the gang declared (request.nodes ≥ 2).
	Gang market.Declaration
	// Rounds bounds how many times the gang is leased and left to lapse;
	// default 1.
	Rounds int
	// Within bounds each round's wait for the parts to be leased, and
	// then for their providers to give them up; default 2m30s each (a
	// provider waits two minutes for a gang lease).
	Within time.Duration
	// ProbeFor is how long a round after the first waits for its first
	// proposal before the rogue takes it that no provider will take its
	// gang's parts; default 10s.
	ProbeFor time.Duration
}

func (o WithholdOptions) withDefaults() WithholdOptions {
	orDefault(&o.Rounds, 1)
	orDefault(&o.Within, 150*time.Second)
	orDefault(&o.ProbeFor, 10*time.Second)
	return o
}

// WithholdGangLease declares o.Gang as a submitter, countersigns every
// part's lease and each receipt, and never sends the gang lease: each
// provider holds its part's GPUs until it gives the part up. Each round
// waits for every part to be leased, then for every part's final receipt;
// the parts are then open again and the next round waits for them to be
// leased anew. Held sums, over parts and rounds, the time held as the
// final receipts say; the notes say how each part ended and whom its
// receipt blames.
func (r *Rogue) WithholdGangLease(ctx context.Context, o WithholdOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackGangWithheld}
	n := o.Gang.Request.Nodes
	if n < 2 {
		return res, fmt.Errorf("rogue: %s needs a gang, not request.nodes %d", AttackGangWithheld, n)
	}
	r.Serve(SubmitterPolicy{Receipts: Countersign})
	g, err := r.Declare(ctx, o.Gang, true)
	if err != nil {
		return res, err
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = market.TaskID(g.ID, i)
	}
	// done counts, by part, the leases already ended in earlier rounds.
	done := make([]int, n)
	for round := 1; round <= o.Rounds; round++ {
		wait := o.Within
		if round > 1 {
			wait = o.ProbeFor
		}
		leased := func(s *submitting) bool {
			for _, p := range parts {
				if s.liveLeaseLocked(p) == nil {
					return false
				}
			}
			return true
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := r.waitSubmitting(wctx, leased)
		cancel()
		if err != nil {
			taken := 0
			for i, p := range parts {
				taken += len(r.Leases(p)) - done[i]
			}
			if round == 1 {
				return res, fmt.Errorf("rogue: the parts of gang %s were not all leased within %s (%d were)", g.ID, wait, taken)
			}
			res.Steps = append(res.Steps, Step{What: "parts leased", Answer: Counted, Count: taken, Err: fmt.Sprintf("round %d: %d of %d taken within %s", round, taken, n, wait)})
			break
		}
		res.Steps = append(res.Steps, Step{What: "parts leased", Answer: Counted, Count: n, Err: fmt.Sprintf("round %d: %d of %d", round, n, n)})
		ectx, cancel := context.WithTimeout(ctx, o.Within)
		err = r.waitSubmitting(ectx, func(s *submitting) bool {
			for _, p := range parts {
				if s.liveLeaseLocked(p) != nil {
					return false
				}
			}
			return true
		})
		cancel()
		if err != nil {
			return res, fmt.Errorf("rogue: the parts of gang %s were still held %s after they were leased", g.ID, o.Within)
		}
		for i, p := range parts {
			ls := r.Leases(p)
			for _, l := range ls[done[i]:] {
				if l.Final == nil {
					continue
				}
				held := l.Final.Held()
				res.Held += held
				res.Steps = append(res.Steps, Step{What: "part given up", Answer: Accepted, Err: fmt.Sprintf("%s/%s after %s", l.Final.Outcome, l.Final.Attribution, held.Round(100*time.Millisecond))})
				res.note("round %d part %d: held %s, ended %s, attributed to the %s", round, i, held.Round(100*time.Millisecond), l.Final.Outcome, l.Final.Attribution)
			}
			done[i] = len(ls)
		}
	}
	return res, nil
}

// sortLeases orders leases by when the rogue countersigned them.
func sortLeases(ls []HeldLease) {
	slices.SortFunc(ls, func(a, b HeldLease) int { return a.Countersigned.Compare(b.Countersigned) })
}
