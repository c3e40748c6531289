package submitter

import (
	"context"

	"github.com/e31network/e31/node/api"
)

// handle is what the registry hands out for a job, whatever its kind: a
// chain of attempts (attempts.go), one attempt named by its own ID, an
// array (array.go), a held job (hold.go) or a gang (gang.go). Each kind
// answers for itself what the user asks of the job.
type handle interface {
	// view is the job as the API shows it when it is at another version
	// than seen, has ended, or done is set; else a channel closed at its
	// next change.
	view(seen uint64, done bool) (api.Job, <-chan struct{})
	// withdraw withdraws what has not ended yet and returns the job.
	withdraw(ctx context.Context) (api.Job, error)
	// resume runs the job again after it ended short of completing: from
	// its last checkpoint, or from the beginning with fromStart.
	resume(ctx context.Context, fromStart bool) (api.Job, error)
	// output is the CID a job:ID/out source reads.
	output(ctx context.Context) (string, error)
}

// gangHandle is the handle of a gang's record, over the gangs (gangs.go).
type gangHandle struct {
	k     *kit
	g     *jobTracker
	whole bool // the gang under the ID it was submitted with
}

func (h gangHandle) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	if h.whole {
		return h.k.gangs.chainView(h.g, seen, done)
	}
	return h.k.arrayView(h.g, seen, done)
}

func (h gangHandle) withdraw(ctx context.Context) (api.Job, error) {
	return h.k.gangs.withdraw(ctx, h.g, h.whole)
}

func (h gangHandle) resume(ctx context.Context, fromStart bool) (api.Job, error) {
	return h.k.gangs.resume(ctx, h.k.lastAttempt(h.g), fromStart)
}

func (h gangHandle) output(ctx context.Context) (string, error) {
	return arrayRun{h.k, h.k.lastAttempt(h.g)}.outputAs(ctx, h)
}
