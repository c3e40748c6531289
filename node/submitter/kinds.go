package submitter

import (
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// What kind of job a record is (a job or an attempt of one, an array or
// one of its tasks, a held job), and whether its chain of attempts goes on
// by itself: what each handle (handle.go) and the loops read of a record.

// maxAttempts bounds a walk of a chain, against a damaged store that
// links one in a loop; a declaration's max_resumes is far below it.
const maxAttempts = 1 << 10

// root is the ID of the job this attempt belongs to, as its user
// submitted it.
func (r *Record) root() string {
	if r.Root != "" {
		return r.Root
	}
	return r.ID
}

// resumeDue reports whether this attempt ended in a way its declaration
// asks to go on from automatically (autoContinues), and has not been
// resumed yet: the job it belongs to goes on.
func (r *Record) resumeDue() bool {
	return r.terminal() && r.Next == "" && r.ResumeFailed == "" && r.autoContinues()
}

// autoContinues reports whether the attempt ended in a way its declaration
// asks the submitter to go on from by itself: lost with its provider and
// declared resume: auto, with resumes left; or failed by its own fault
// with request.retries left. A job preempted (its provider's owner took
// the machine back, e31 drain) goes on whatever it declared, from its last
// checkpoint or from the start, up to maxPreemptions times: no fault of
// the job's, and no loss of its own. A task of an array lost with its provider
// goes on whatever it declared, up to market.DefaultMaxResumes times: an
// array is done when every index is, not when a provider left.
func (r *Record) autoContinues() bool {
	if r.Array != "" && r.Declaration.Request.Gang() { // a gang's part
		return false // a gang goes on whole, or not at all (gang.go)
	}
	cp := r.Declaration.Output.Checkpoints
	switch {
	case r.placeholder():
		return false // a held job never ran: its ending is its upstream's
	case r.Outcome == ledger.OutcomeProviderLost && r.ofTask() && (cp == nil || cp.Resume != market.ResumeAuto):
		return r.Resumes < market.DefaultMaxResumes
	case r.Outcome == ledger.OutcomeProviderLost:
		return cp != nil && cp.Resume == market.ResumeAuto && r.Resumes < cp.MaxResumes
	case r.retried():
		return !r.Withdrawn && r.Retries < r.Declaration.Request.Retries
	case r.Outcome == ledger.OutcomePreempted:
		return !r.Withdrawn && r.Preemptions < maxPreemptions
	}
	return false
}

// maxPreemptions bounds how often one job is moved off providers taking
// their machines back: enough for a week of nights on home machines, and a
// stop to a loop.
const maxPreemptions = 32

// retried reports whether the attempt ended as request.retries counts: it
// failed by its own fault.
func (r *Record) retried() bool {
	return r.Outcome == ledger.OutcomeFailed && r.Attribution == ledger.AttributionJob
}

// isArray reports whether the record is an array's, not a job's.
func (r *Record) isArray() bool { return r.Tasks > 0 }

// isArrayTracker reports whether the job is an array's record.
func (j *jobTracker) isArrayTracker() bool {
	var array bool
	j.view(func(r *Record) { array = r.isArray() })
	return array
}

// ofTask reports whether the record is an attempt of a task: the task's
// own, or one that resumes it.
func (r *Record) ofTask() bool { return r.Array != "" || isTask(r.ID) || isTask(r.Root) }

// placeholder reports whether the record is a held job's, which never
// runs: it is not one of the job's attempts.
func (r *Record) placeholder() bool { return r.Hold != nil }

// holding reports whether the record is a held job still waiting.
func (r *Record) holding() bool { return r.Hold != nil && !r.Hold.Released && !r.terminal() }

// isTask reports whether a job ID is a task's.
func isTask(job string) bool {
	_, _, ok := market.SplitTaskID(job)
	return ok
}
