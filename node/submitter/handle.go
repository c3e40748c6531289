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

// handleOf returns the handle of the job whose tracker is j: j's record
// says which kind of job it is, and whether it is named as a whole (the
// ID it was submitted under) or as one of its attempts.
func (k *kit) handleOf(j *jobTracker) handle {
	var root string
	var array, gang, held, replicated, checked bool
	j.view(func(r *Record) {
		root, array, gang, held, replicated = r.Root, r.isArray(), r.isGang(), r.placeholder(), r.replicated()
		checked = len(r.Replicas) > 0 && r.ReplicaOf == ""
	})
	whole := root == ""
	switch {
	// An array run as replicas is followed as an array: its tasks are
	// checked one by one, and arrayRun's view counts the checks.
	case replicated && !array:
		return replicaRun{chain{k, j, whole}}
	case gang:
		return gangHandle{k, j, whole}
	case array:
		return arrayRun{k, j}
	case held:
		return heldJob{chain{k, j, whole}}
	case checked:
		return checkedTask{chain{k, j, whole}}
	}
	return chain{k, j, whole}
}

// find returns the handle of a job by its ID or a unique prefix of it, or
// by a task ID.N of a held array (findShown).
func (k *kit) find(id string) (handle, error) {
	j, err := k.findShown(id)
	if err != nil {
		return nil, err
	}
	return k.handleOf(j), nil
}
