package rogue

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
)

// SquatOptions shape SquatGangPart.
type SquatOptions struct {
	// Rounds bounds how many times the rogue takes its part; default 3.
	Rounds int
	// Within bounds each round: from taking the part to taking it again
	// (or seeing it leased to another); default 1m.
	Within time.Duration
	// Retry is how often the part is proposed for while the rogue does not
	// hold it; default 50ms, so that the rogue is first when it is queued
	// again.
	Retry time.Duration
}

func (o SquatOptions) withDefaults() SquatOptions {
	orDefault(&o.Rounds, 3)
	orDefault(&o.Within, time.Minute)
	orDefault(&o.Retry, 50*time.Millisecond)
	return o
}

// SquatGangPart takes part rank of an honest gang, as the provider Match
// gives it to, and never signs the gang lease: the submitter's request for
// its signature goes unanswered until the submitter gives up. Meanwhile
// the rogue sends honest interim receipts, so that only the gang lease
// is withheld, and goes on proposing for the part, so that it is the
// first to take it again once the gang is queued anew: for o.Rounds
// rounds, or until the part is leased to another provider (placed without
// it). Held is how long the rogue held its part, over all rounds: the
// time every other part's GPUs were held for nothing.
func (r *Rogue) SquatGangPart(ctx context.Context, gang string, rank int, o SquatOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackGangSquat}
	part := market.TaskID(gang, rank)
	what := fmt.Sprintf("part %d proposal", rank)
	j, err := r.WaitJob(ctx, part)
	if err != nil {
		return res, err
	}
	var held *heldPart // the part's lease the rogue holds, if any
	defer func() {
		if held != nil {
			held.stop()
		}
	}()
	// end closes a round: the held lease is given up, its time counted,
	// its GPU freed in every view at once, so that Match, which finds it
	// the best fit, gives it the part again rather than another provider.
	end := func() error {
		if held == nil {
			return nil
		}
		held.stop()
		res.Held += held.time()
		res.Steps = append(res.Steps, Step{What: "gang lease signature", Answer: NoAnswer, Err: fmt.Sprintf("withheld, asked for it %s", times(r.GangCalls(held.l.ID())))})
		err := held.l.Release(ctx, ledger.OutcomeWithdrawn, ledger.AttributionSubmitter)
		held = nil
		return err
	}
	squatted := 0
	for squatted < o.Rounds {
		rctx, cancel := context.WithTimeout(ctx, o.Within)
		l, placed, lastErr := r.takePart(rctx, j, o.Retry)
		cancel()
		if err := end(); err != nil {
			return res, err
		}
		if l == nil {
			if lastErr != nil {
				res.Steps = append(res.Steps, stepOf(what, lastErr, Countersigned))
			}
			if placed != "" {
				res.note("the gang was placed again without the rogue (part %d on %s)", rank, short(placed))
			}
			break
		}
		squatted++
		res.Steps = append(res.Steps, Step{What: what, Answer: Countersigned})
		held = r.holdPart(ctx, l)
	}
	if held != nil {
		// The last round: the lease lasts until the submitter gives the
		// gang up, which it says by refusing the next receipt.
		held.wait(o.Within)
		if err := end(); err != nil {
			return res, err
		}
	}
	avoided := Step{What: "named in the requeue's avoid list", Answer: Counted, Err: "no"}
	if r.Avoided(part, r.self) {
		avoided.Count, avoided.Err = 1, fmt.Sprintf("yes, for part %d", rank)
	}
	res.Steps = append(res.Steps, avoided)
	res.note("took the part %s, holding it %s in all", times(squatted), res.Held.Round(100*time.Millisecond))
	return res, nil
}

// heldPart is a gang part's lease the rogue holds, with honest receipts
// going every interval until the submitter refuses one or stop.
type heldPart struct {
	l      *Lease
	cancel context.CancelFunc
	done   chan struct{} // closed once the receipts stopped
	// ended is when they did; written before done is closed.
	ended time.Time
}

func (r *Rogue) holdPart(ctx context.Context, l *Lease) *heldPart {
	kctx, cancel := context.WithCancel(ctx)
	h := &heldPart{l: l, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		_ = l.KeepAlive(kctx, ledger.PhaseStaging)
		h.ended = time.Now()
	}()
	return h
}

// wait waits, up to within, for the submitter to refuse a receipt.
func (h *heldPart) wait(within time.Duration) {
	select {
	case <-h.done:
	case <-time.After(within):
	}
}

// stop ends the receipts and waits for them to end.
func (h *heldPart) stop() {
	h.cancel()
	<-h.done
}

// time is how long the lease was held: until a receipt was refused, or
// the receipts were stopped.
func (h *heldPart) time() time.Duration { return h.ended.Sub(h.l.Countersigned) }

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
		if task.Sleep(ctx, every) != nil {
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
