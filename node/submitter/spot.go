package submitter

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// Spot checks of an array (verify.spot): each task that completes is drawn
// once, then, with the array's spot share, run again on another provider
// and compared (a check whose first run is the task, verifier.go). The
// draw is made after the task completed, with this node's own randomness,
// so that no provider can know whether its run will be checked. A check
// whose majority goes against the task's provider caught it: every task
// that provider returned for the array runs again elsewhere (RerunFor),
// and the provider is distrusted. A check that goes against the checking
// provider leaves the task as it was.

type spotDraw struct{ v *verifier }

// array draws the array's tasks that completed since the last round; over
// says the array has ended and every completed task was drawn.
func (s spotDraw) array(ctx context.Context, id string) (over bool) {
	k := s.v.k
	at := k.jobs.get(id)
	if at == nil {
		return true
	}
	var share float64
	var checks bool
	at.view(func(r *Record) {
		checks = r.Verify.Checks()
		if checks {
			share = r.Verify.Spot
		}
	})
	if !checks {
		return true
	}
	a := arrayRun{k, at}
	tids := taskIDsOf(at.snapshot())
	s.rerun(ctx, a, tids, time.Now())
	done, drawn := true, 0
	defer func() { s.v.note(id, fmt.Sprintf("drawn %d, under way %d", drawn, s.pending(id))) }()
	for _, tid := range tids {
		t := k.jobs.get(tid)
		if t == nil {
			continue
		}
		first := t.snapshot()
		last := k.lastAttempt(t).snapshot()
		if !last.terminal() || last.resumeDue() {
			done = false
			continue
		}
		if share <= 0 || first.Spot != "" || last.Outcome != ledger.OutcomeCompleted || first.RerunFor != "" || len(first.Replicas) > 0 {
			continue
		}
		draw := spotPass
		if chance() < share {
			draw = spotCheck
		}
		if err := t.update(func(r *Record) error { r.Spot = draw; return nil }); err != nil {
			done = false
			continue
		}
		drawn++
		if draw == spotPass {
			continue
		}
		first.Spot = draw
		if err := s.v.replicate(ctx, first, []string{last.provider()}); err != nil {
			k.log.Warn("spot check not submitted", "task", tid, "err", err)
		}
		done = false
	}
	return done && s.pending(id) == 0
}

// pending counts the spot checks of the array still under way.
func (s spotDraw) pending(array string) int {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	n := 0
	for id := range s.v.groups {
		if a, _, ok := market.SplitTaskID(id); ok && a == array {
			n++
		}
	}
	return n
}

// chance is a number in [0, 1) from this node's own randomness.
func chance() float64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return float64(binary.BigEndian.Uint64(b[:])>>11) / (1 << 53)
}

// rerun runs again, elsewhere, each task of the array whose last attempt
// completed on a provider this node distrusts: caught by a check of this
// array or of another job. Each new attempt avoids the provider.
func (s spotDraw) rerun(ctx context.Context, a arrayRun, tids []string, now time.Time) {
	k := s.v.k
	var indices []int
	var liars []string
	for _, tid := range tids {
		t := k.jobs.get(tid)
		if t == nil {
			continue
		}
		last := k.lastAttempt(t).snapshot()
		p := last.provider()
		if p == "" || !last.terminal() || last.resumeDue() || last.Outcome != ledger.OutcomeCompleted {
			continue
		}
		if _, distrusted := s.v.distrust.of(p, now); !distrusted {
			continue
		}
		if err := t.update(func(r *Record) error { r.RerunFor = p; return nil }); err != nil {
			continue
		}
		_, i, _ := market.SplitTaskID(tid)
		indices = append(indices, i)
		liars = append(liars, p)
	}
	if len(indices) == 0 {
		return
	}
	if _, err := a.rerun(ctx, rework{tasks: indices, fromStart: true}, nil); err != nil {
		k.log.Warn("run again the tasks of a distrusted provider", "array", a.p.id, "err", err)
		return
	}
	for n, i := range indices {
		if t := k.jobs.get(market.TaskID(a.p.id, i)); t != nil {
			(failureWatch{k.lastAttempt(t)}).avoid(ctx, liars[n], "", "its provider lost a check of results")
		}
	}
	k.log.Warn("tasks of a distrusted provider run again elsewhere", "array", a.p.id, "tasks", len(indices))
}

// shown is the spot checks of the array whose record is parent, as the
// API shows them, and how many are under way, counting the tasks of a
// provider just caught that are not yet run again: until then the array
// has not ended.
func (s spotDraw) shown(parent Record) (*api.Verification, int) {
	out := &api.Verification{Mode: parent.Verify.Mode(), State: "checking", Spot: parent.Verify.Spot}
	caught := map[string]bool{}
	undrawn, due := 0, 0
	now := time.Now()
	for _, tid := range taskIDsOf(parent) {
		t := s.v.k.jobs.get(tid)
		if t == nil {
			continue
		}
		var spot, rerun, provider string
		var completed, replicated bool
		t.view(func(r *Record) { spot, rerun, replicated = r.Spot, r.RerunFor, len(r.Replicas) > 0 })
		last := s.v.k.lastAttempt(t)
		last.view(func(r *Record) {
			completed = r.terminal() && !r.resumeDue() && r.Outcome == ledger.OutcomeCompleted
			provider = r.provider()
		})
		if spot == spotCheck || replicated {
			out.Checks++
		}
		if parent.Verify.Spot > 0 && spot == "" && completed && rerun == "" && !replicated {
			undrawn++
		}
		// Completed on a provider a check has just caught: the next
		// round runs it again (rerun), so the array is not over yet,
		// though every check is.
		if _, distrusted := s.v.distrust.of(provider, now); completed && rerun == "" && provider != "" && distrusted {
			due++
		}
		if rerun != "" {
			out.Rerun++
			if !caught[rerun] {
				caught[rerun] = true
				out.Caught = append(out.Caught, rerun)
			}
		}
	}
	pending := s.pending(parent.ID) + undrawn
	switch {
	case pending > 0:
		out.Reason = fmt.Sprintf("%d of %d checks under way", pending, out.Checks+undrawn)
	case due > 0:
		out.Reason = fmt.Sprintf("%d tasks of a caught provider to run again", due)
	case len(out.Caught) > 0:
		out.State = verdictSettled
		out.Reason = fmt.Sprintf("checks caught %d provider(s); their %d tasks ran again elsewhere", len(out.Caught), out.Rerun)
	default:
		out.State = verdictAgreed
		out.Reason = fmt.Sprintf("%d checks agreed", out.Checks)
	}
	return out, pending + due
}

// taskIDsOf are the IDs of the tasks of the array whose record is r.
func taskIDsOf(r Record) []string {
	ids := make([]string, r.Tasks)
	for k := range ids {
		ids[k] = market.TaskID(r.ID, r.Declaration.Array.Index(k))
	}
	return ids
}
