package rogue

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// SquatOptions shape SquatGangPart.
type SquatOptions struct {
	// Rounds bounds how many times the rogue takes its part; default 3.
	Rounds int
	// Within bounds each round: taking the part, then the submitter's
	// giving the gang up; default 1m.
	Within time.Duration
	// Retry is how often a refused proposal is made again within a
	// round; default 250ms.
	Retry time.Duration
}

func (o SquatOptions) withDefaults() SquatOptions {
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Within <= 0 {
		o.Within = time.Minute
	}
	if o.Retry <= 0 {
		o.Retry = 250 * time.Millisecond
	}
	return o
}

// SquatGangPart takes part rank of an honest gang, as the provider Match
// gives it to, and never signs the gang lease: the submitter's request for
// its signature goes unanswered until the submitter gives up. Meanwhile
// the rogue sends honest interim receipts, so that only the gang lease
// is withheld. It takes the part again each time the gang is placed
// anew, for o.Rounds rounds, and stops early once the gang's part is
// leased to another provider (placed without it). Held is how long the
// rogue held its part, over all rounds: the time every other part's
// GPUs were held for nothing.
func (r *Rogue) SquatGangPart(ctx context.Context, gang string, rank int, o SquatOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackGangSquat}
	part := market.TaskID(gang, rank)
	j, err := r.WaitJob(ctx, part)
	if err != nil {
		return res, err
	}
	squatted := 0
	for round := 1; round <= o.Rounds; round++ {
		rctx, cancel := context.WithTimeout(ctx, o.Within)
		l, placed, lastErr := r.takePart(rctx, j, o.Retry)
		if l == nil {
			cancel()
			if lastErr != nil {
				res.Steps = append(res.Steps, stepOf(fmt.Sprintf("part %d proposal", rank), lastErr, Countersigned))
			}
			if placed != "" {
				res.note("the gang was placed again without the rogue (part %d on %s)", rank, short(placed))
			}
			break
		}
		squatted++
		res.Steps = append(res.Steps, Step{What: fmt.Sprintf("part %d proposal", rank), Answer: Countersigned})
		alive := make(chan error, 1)
		go func() { alive <- l.KeepAlive(rctx, ledger.PhaseStaging) }()
		// The lease's time ends when the submitter gives the gang up,
		// which it says by refusing the next receipt.
		<-alive
		cancel()
		res.Held += time.Since(l.Countersigned)
		res.Steps = append(res.Steps, Step{What: "gang lease signature", Answer: NoAnswer, Err: fmt.Sprintf("withheld, asked for it %s", times(r.GangCalls(l.ID())))})
	}
	avoided := Step{What: "named in the requeue's avoid list", Answer: Counted, Err: "no"}
	if r.Avoided(part, r.self) {
		avoided.Count, avoided.Err = 1, fmt.Sprintf("yes, for part %d", rank)
	}
	res.Steps = append(res.Steps, avoided)
	res.note("took the part %s, holding it %s in all", times(squatted), res.Held.Round(100*time.Millisecond))
	return res, nil
}

// takePart proposes for a gang's part until the submitter countersigns,
// ctx ends, or the part is leased to another provider (placed, its ID).
// It returns the last refusal when it gets no lease.
func (r *Rogue) takePart(ctx context.Context, j Job, every time.Duration) (l *Lease, placed string, last error) {
	for {
		// Leased to another, whether or not it has run since: the gang
		// went on without the rogue.
		if p, _, ok := r.LeasedTo(j.ID); ok && p != r.self.String() {
			return nil, p, last
		}
		l, err := r.Propose(ctx, j, Terms{})
		if l != nil {
			return l, "", nil
		}
		if ctx.Err() != nil {
			return nil, "", last
		}
		last = err
		if sleep(ctx, every) != nil {
			return nil, "", last
		}
	}
}

// times writes a count of times.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// short is the tail of a peer ID, for notes.
func short(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-8:]
	}
	return id
}
