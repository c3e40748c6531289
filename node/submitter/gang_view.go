package submitter

import (
	"fmt"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// partsOf lists a gang's parts for its view: each part's rank, provider
// and state, by its record.
func (g *gangs) partsOf(gang string, n int) []api.Part {
	out := make([]api.Part, 0, n)
	for r, t := range g.members(gang, n) {
		p := api.Part{Rank: r, State: api.JobQueued}
		if t != nil {
			t.view(func(rec *Record) {
				p.ID, p.State, p.Outcome = rec.ID, rec.State, string(rec.Outcome)
				if rec.Lease != nil {
					p.Provider = rec.Lease.Terms.Provider
				}
			})
		}
		out = append(out, p)
	}
	return out
}

// view completes an array's view of a gang: its parts, and, once it has
// ended short of completion, how: as the part that ended it did (the
// others were stopped because of it), naming that part.
func (g *gangs) view(out *api.Job, parent Record) {
	out.Parts = g.partsOf(parent.ID, parent.Tasks)
	if out.State == api.JobQueued {
		// Match says why of each part alike: the gang's reason.
		if p0, _, err := g.host.view(market.TaskID(parent.ID, 0), 0, true); err == nil && p0.Reason != "" {
			out.Reason = p0.Reason
		}
	}
	if out.State == api.JobQueued {
		for _, p := range out.Parts {
			if p.State != api.JobQueued {
				// Some parts held, waiting for the rest.
				out.State, out.Reason = api.JobRenting, "holding the parts leased so far until every part is, to start them together"
				break
			}
		}
	}
	if !out.State.Terminal() || out.Outcome == string(ledger.OutcomeCompleted) {
		return
	}
	// The part that ended the gang: of those that failed, the first to
	// end (the others were stopped because of it).
	var cause *Record
	var at api.Part
	for _, p := range out.Parts {
		if p.Outcome == "" || p.Outcome == string(ledger.OutcomeCompleted) || p.Outcome == string(ledger.OutcomeWithdrawn) {
			continue
		}
		t := g.jobs.get(p.ID)
		if t == nil {
			continue
		}
		r := t.snapshot()
		if r.endedBefore(cause) {
			cause, at = &r, p
		}
	}
	if cause != nil {
		out.Outcome, out.Attribution = string(cause.Outcome), string(cause.Attribution)
		out.Reason = fmt.Sprintf("part %d (on %s) ended %s: %s", at.Rank, at.Provider, cause.Outcome, cause.Reason)
	}
}

// gangResumeDue reports whether a gang that has ended short of completion
// as failed says is about to go on by itself (gangContinues), or was
// decided to before a restart, so that its followers see it queued rather
// than ended.
func (r *Record) gangResumeDue(failed Record) bool {
	if !r.isGang() || r.Next != "" || r.ResumeFailed != "" || r.Withdrawn {
		return false
	}
	return r.Resumed || failed.gangContinues(r) != continueNot
}

// chainView is the view of a gang under the ID it was submitted with: its
// last attempt, the whole gang again after a failure, with every attempt
// listed.
func (g *gangs) chainView(first *jobTracker, seen uint64, done bool) (api.Job, <-chan struct{}) {
	chain := g.host.attempts(first)
	last := chain[len(chain)-1]
	out, changed := g.host.arrayView(last, seen, done)
	lastRec := last.snapshot()
	failed := Record{Outcome: ledger.Outcome(out.Outcome), Attribution: ledger.Attribution(out.Attribution)}
	if out.State.Terminal() && out.Outcome != string(ledger.OutcomeCompleted) && out.Outcome != string(ledger.OutcomeWithdrawn) && lastRec.gangResumeDue(failed) {
		out.State, out.Outcome, out.Attribution = api.JobQueued, "", ""
		out.Reason = "going on whole, each part from its last checkpoint: " + out.Reason
	}
	if len(chain) == 1 {
		return out, changed
	}
	out.ID = first.id
	out.Attempts = out.Attempts[:0]
	for i, a := range chain {
		v, _ := g.host.arrayView(a, 0, true)
		out.Attempts = append(out.Attempts, api.Attempt{N: i + 1, ID: a.id, State: v.State, Outcome: v.Outcome,
			Attribution: v.Attribution, Reason: v.Reason, Submitted: v.Submitted})
	}
	return out, changed
}

// endedBefore reports whether r, a gang part that failed, ended before
// cause, the failed part found so far (nil: none yet). Of a gang's parts
// that failed, the first to end is the gang's cause; the others were
// stopped because of it.
func (r *Record) endedBefore(cause *Record) bool {
	return cause == nil || r.stepAt(api.StepRelease).Before(cause.stepAt(api.StepRelease))
}
