package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
)

// Jobs lists this node's jobs, oldest first.
func (s *Submitter) Jobs() []api.Job {
	out, stored := s.jobs.listed()
	if stored {
		out = append(out, s.jobs.storedJobs()...)
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Job returns one job by its ID or a unique prefix of it.
func (s *Submitter) Job(id string) (api.Job, error) {
	j, err := s.jobs.find(id)
	if err != nil {
		return api.Job{}, err
	}
	return j.api(), nil
}

// WaitJob returns a job once it is at another version than seen, or has
// ended, or when ctx ends, whichever comes first: a client that follows a
// job asks again with the version it last got, and hears of each change as
// it is made instead of on its next poll. At ctx's end it returns the job as
// it is, without error. A change is counted as it is made in memory, before
// it is on disk, and a change that left the job as it was may count too:
// a follower may be woken to find nothing new.
func (s *Submitter) WaitJob(ctx context.Context, id string, seen uint64) (api.Job, error) {
	for {
		j, err := s.jobs.find(id)
		if err != nil {
			return api.Job{}, err
		}
		out, changed := j.next(seen, ctx.Err() != nil)
		if changed == nil {
			return out, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// Counts returns how many jobs are in each state, for metrics.
func (s *Submitter) Counts() map[api.JobState]int {
	return s.jobs.counts()
}

// Output returns the CID of a job's output (or last checkpoint), with the
// job's full ID.
func (s *Submitter) Output(id string, checkpoint bool) (jobID string, root cid.Cid, err error) {
	j, err := s.jobs.find(id)
	if err != nil {
		return "", cid.Undef, err
	}
	r := j.snapshot()
	which, what := r.Output, "output"
	if checkpoint {
		which, what = r.Checkpoint, "checkpoint"
	}
	jobID, st := r.ID, r.State
	if which == "" {
		return jobID, cid.Undef, conflict(fmt.Errorf("job %s has no %s yet (state %s)", jobID, what, st))
	}
	c, err := cid.Decode(which)
	if err != nil {
		return jobID, cid.Undef, fmt.Errorf("job %s %s %q: %w", jobID, what, which, err)
	}
	return jobID, c, nil
}

// FullID resolves a job ID prefix; an unknown one is returned as given.
func (s *Submitter) FullID(id string) string {
	return s.jobs.fullID(id)
}
