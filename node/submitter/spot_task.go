package submitter

import "github.com/e31network/e31/node/api"

// spotTask is the handle of an array's task drawn for a spot check
// (spot.go): the task's own chain, shown with its check, the runs
// compared and, once all have come back, the verdict, so that `e31
// status ARRAY.7` says whether the task was checked and what the check
// found. Unlike a job run as replicas (replicaRun) the task's state is
// its own runs': the array, not the task, waits for its checks.
type spotTask struct{ chain }

func (s spotTask) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	out, changed := s.chain.view(seen, done)
	out.Verification = s.k.verify.shown(s.j.snapshot())
	return out, changed
}
