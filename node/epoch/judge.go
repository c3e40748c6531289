package epoch

import (
	"log/slog"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
)

// Judge answers a submitter's question about a proposal that no epoch's
// pass of its own gave the provider: would this node's Match, on its view
// as it stands, give the job to that provider? A provider's pass between
// epochs (FastPath) runs the same Match on the same kind of view, so an
// honest provider's claim holds here too unless the two views differ (a
// message one of them has not yet received); then the proposal is refused
// and the provider proposes again on its next pass.
//
// Passes are shared: a pass made within judgeReuse answers every question
// it settles, and a question it does not settle makes a new pass only if
// the last is older than judgeFresh, since a view a few milliseconds old
// has little new in it. The fields are set before use and never changed.
type Judge struct {
	Clock  Clock
	Market *view.Market
	// Log receives recovered panics; required.
	Log *slog.Logger
	// Panicked, if set, is told of every panic recovered from a pass.
	Panicked func(where string)

	mu sync.Mutex // guards last; held across a pass, so that questions asked together share one
	// last is the latest pass; its zero value is no pass.
	last judged
}

// judged is one pass of a Judge.
type judged struct {
	at  time.Time
	res market.Result
}

// How long a Judge's pass answers questions for (judgeReuse), and how old
// it must be before a question it does not settle makes another
// (judgeFresh).
const (
	judgeReuse = 250 * time.Millisecond
	judgeFresh = 5 * time.Millisecond
)

// Assigns reports whether Match on this node's view at now assigns job to
// provider or reserves it for it. Over a queue deeper than a pass between
// epochs takes (fastMaxJobs) it makes no pass and says no: there, only the
// epoch's passes assign.
func (j *Judge) Assigns(job, provider string, now time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	age := now.Sub(j.last.at)
	if !j.last.at.IsZero() && age >= 0 && age < judgeReuse && gives(j.last.res, job, provider) {
		return true
	}
	if !j.last.at.IsZero() && age >= 0 && age < judgeFresh && mentions(j.last.res, job) {
		return false
	}
	res, ok := j.pass(now)
	if !ok {
		return false
	}
	j.last = judged{at: now, res: res}
	return gives(res, job, provider)
}

// Pass runs Match on the view at now, as a question would, and keeps it
// to answer the questions that follow; ok is false where none ran (see
// pass). A node that makes no epoch passes on a view (a market it only
// follows for its jobs) reads from it why its jobs wait.
func (j *Judge) Pass(now time.Time) (res market.Result, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if res, ok = j.pass(now); ok {
		j.last = judged{at: now, res: res}
	}
	return res, ok
}

// pass runs Match on the view at now; ok is false where none ran: no job
// open, too many, or a panic, which fails this pass only.
func (j *Judge) pass(now time.Time) (res market.Result, ok bool) {
	defer recoverPanic(j.Log, j.Panicked, "pass", "judge")
	if open := j.Market.OpenCount(); open == 0 || open > fastMaxJobs {
		return market.Result{}, false
	}
	offers := j.Clock.Offers.At(now, now)
	v := j.Market.Current(now, offers, func(t time.Time) uint64 { e, _ := j.Clock.Of(t); return e }, j.Clock.First)
	return market.Match(v, market.Options{}), true
}

// mentions reports whether res says anything of job: a pass made on a
// view that did not hold the job yet (declared a moment ago) settles no
// question about it, however fresh.
func mentions(res market.Result, job string) bool {
	for _, a := range res.Assignments {
		if a.Job == job {
			return true
		}
	}
	for _, r := range res.Reservations {
		if r.Job == job {
			return true
		}
	}
	for _, w := range res.Waiting {
		if w.Job == job {
			return true
		}
	}
	return false
}

// gives reports whether res assigns job to provider or reserves it for it.
func gives(res market.Result, job, provider string) bool {
	for _, a := range res.Assignments {
		if a.Job == job {
			return a.Provider == provider
		}
	}
	for _, r := range res.Reservations {
		if r.Job == job && r.Provider == provider {
			return true
		}
	}
	return false
}
