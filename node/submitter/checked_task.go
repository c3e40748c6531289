package submitter

import "github.com/e31network/e31/node/api"

// checkedTask is the handle of an array's task that other runs check: one
// drawn for a spot check (spot.go), or one of an array run as replicas.
// It is the task's own chain, shown with its check, the runs compared
// and, once all have come back, the verdict, so that `e31 status ARRAY.7`
// says whether the task was checked and what the check found. Unlike a
// job run as replicas (replicaRun) the task's state is its own runs': the
// array, not the task, waits for its checks.
type checkedTask struct{ chain }

func (c checkedTask) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	out, changed := c.chain.view(seen, done)
	out.Verification = c.k.verify.shown(c.j.snapshot())
	return out, changed
}
