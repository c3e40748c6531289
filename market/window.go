package market

// Windows shorter than a job's limit. A provider with contribution hours
// states when its window closes (Offer.OpenUntil), and at that instant it
// preempts what still runs, with its grace: each run gets SIGTERM and time
// to write a last checkpoint, and its lease ends preempted, owed up to its
// last checkpoint. A job that checkpoints (Job.Checkpoint) loses only what
// it ran since then, and its submitter puts it back in the queue to go on
// from that checkpoint elsewhere. So such a job may be cut at a window's
// close: Match places it on an offer whose window ends before its limit
// would, if the window leaves it at least one checkpoint interval plus
// WindowMargin, and no offer takes it whole now.
//
// The order of places, for a job that checkpoints:
//
//  1. Where the job fits whole (its limit ends by the window's close), by
//     the rule every job follows: a holder of its data, then best fit,
//     then the rendezvous weight, a reserved provider only as backfill.
//  2. Failing any, where it is cut: an offer whose window leaves it
//     Checkpoint + WindowMargin from now, by best fit and the rendezvous
//     weight (locality does not choose among cut places: the data of a
//     job that moves on at the close moves again anyway), a reserved
//     provider only as backfill, counting the job's whole limit.
//  3. Failing that, it reserves as any job: only a provider whose window
//     holds its whole limit from the reservation's start, since a
//     reservation waits for room a cut place would give back too soon.
//
// A job without checkpoints, and every part of a gang (a gang goes on
// whole or not at all), keeps the rule of whole fit alone. A cut place
// charges the submitter as any other (Charge of the whole limit), and the
// lease counts as ending at its limit, as every lease does: later jobs of
// the pass see the provider busy at least as long as it really is.

// WindowMargin is what a window must leave a cut job beyond one checkpoint
// interval: the time to stage and start the run, and the grace of the
// provider's preemption at the close (exec.DefaultGrace is 30s).
const WindowMargin = Minute

// cutSpan is the least time from now a provider's window must leave a job
// placed there to be cut at its close, or 0 when the job may not be cut:
// it declares no checkpoints, is part of a gang, or a window that short
// would hold its whole limit anyway.
func cutSpan(j *Job) Duration {
	if j.Checkpoint <= 0 || j.Request.Gang() {
		return 0
	}
	span := j.Checkpoint + WindowMargin
	if span < j.Checkpoint || span >= j.Request.Limit {
		return 0
	}
	return span
}
