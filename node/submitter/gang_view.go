package submitter

import (
	"fmt"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// records are copies of a gang's parts' records, by rank; nil where one
// is missing.
func (g *gangs) records(gang string, n int) []*Record {
	out := make([]*Record, n)
	for r, t := range g.members(gang, n) {
		if t != nil {
			rec := t.snapshot()
			out[r] = &rec
		}
	}
	return out
}

// gangEnding is how a gang attempt stands, read from its parts' records
// as its view counts them (arrayView, classOf): whether every part has
// ended, and how the gang then ended.
type gangEnding struct {
	over bool
	// outcome is the gang's: that of the part that ended it (cause), or
	// else completed, failed where a part did not complete, withdrawn
	// where a part was withdrawn before it ran. Set once over.
	outcome ledger.Outcome
	// cause is the part that ended the gang: of those that ended neither
	// completed nor withdrawn, the first to end (the others were stopped
	// because of it); nil when none did. rank is its rank.
	cause *Record
	rank  int
}

// endingOf reads a gang's ending from its parts' records, by rank.
func endingOf(parts []*Record) gangEnding {
	var e gangEnding
	running, failed, withdrawn := 0, 0, 0
	for rank, p := range parts {
		switch {
		case p == nil || !p.terminal():
			running++
		case p.State == api.JobWithdrawn:
			withdrawn++
		case p.State == api.JobReleased && p.Outcome == ledger.OutcomeCompleted:
		default:
			failed++
		}
		if p == nil || p.Outcome == "" || p.Outcome == ledger.OutcomeCompleted || p.Outcome == ledger.OutcomeWithdrawn {
			continue
		}
		if p.endedBefore(e.cause) {
			e.cause, e.rank = p, rank
		}
	}
	if e.over = running == 0; !e.over {
		return e
	}
	switch {
	case e.cause != nil:
		e.outcome = e.cause.Outcome
	case failed > 0:
		e.outcome = ledger.OutcomeFailed
	case withdrawn > 0:
		e.outcome = ledger.OutcomeWithdrawn
	default:
		e.outcome = ledger.OutcomeCompleted
	}
	return e
}

// ending reads how a gang attempt stands from its parts' records.
func (g *gangs) ending(gang string, n int) gangEnding { return endingOf(g.records(gang, n)) }

// partsOf lists a gang's parts for its view: each part's rank, provider
// and state, by its record.
func partsOf(recs []*Record) []api.Part {
	out := make([]api.Part, 0, len(recs))
	for r, rec := range recs {
		p := api.Part{Rank: r, State: api.JobQueued}
		if rec != nil {
			p.ID, p.State, p.Outcome = rec.ID, rec.State, string(rec.Outcome)
			if rec.Lease != nil {
				p.Provider = rec.Lease.Terms.Provider
			}
		}
		out = append(out, p)
	}
	return out
}

// view completes an array's view of a gang: its parts, and, once it has
// ended short of completion, how: as the part that ended it did (the
// others were stopped because of it), naming that part.
func (g *gangs) view(out *api.Job, parent Record) {
	recs := g.records(parent.ID, parent.Tasks)
	out.Parts = partsOf(recs)
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
	if !out.State.Terminal() {
		return
	}
	// A gang that completed has no part that ended it.
	if e := endingOf(recs); e.cause != nil {
		cause, at := e.cause, out.Parts[e.rank]
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
	e := g.ending(lastRec.ID, lastRec.Tasks)
	failed := Record{Outcome: e.outcome, Attribution: lastRec.Attribution}
	if e.cause != nil {
		failed.Attribution = e.cause.Attribution
	}
	if out.State.Terminal() && failed.Outcome != ledger.OutcomeCompleted && failed.Outcome != ledger.OutcomeWithdrawn && lastRec.gangResumeDue(failed) {
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
