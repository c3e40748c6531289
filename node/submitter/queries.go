package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
)

// Jobs lists this node's jobs, oldest first: each under the ID it was
// submitted with, shown as its last attempt (attempts.go).
func (s *Submitter) Jobs() []api.Job {
	recs, stored := s.jobs.listed()
	if stored {
		recs = append(recs, s.jobs.storedRecords()...)
	}
	byID := make(map[string]*versioned, len(recs))
	for i := range recs {
		byID[recs[i].rec.ID] = &recs[i]
	}
	out := make([]api.Job, 0, len(recs))
	for i := range recs {
		first := &recs[i]
		if first.rec.Root != "" || first.rec.Array != "" || first.rec.ReplicaOf != "" {
			continue // an attempt after the first, a task or a replica: shown within its job or array
		}
		if first.rec.isArray() || first.rec.replicated() {
			if t := s.jobs.get(first.rec.ID); t != nil {
				j, _ := s.handleOf(t).view(0, true) // an array, or a gang
				out = append(out, j)
			}
			continue
		}
		chain := []Record{first.rec}
		last := first
		for n := last.rec.Next; n != "" && len(chain) < maxAttempts; n = last.rec.Next {
			next, ok := byID[n]
			if !ok {
				break
			}
			chain = append(chain, next.rec)
			last = next
		}
		if last.rec.isArray() {
			// A held array, released: listed as the array, under its handle.
			if t := s.jobs.get(last.rec.ID); t != nil {
				j, _ := s.handleOf(t).view(0, true)
				out = append(out, j)
			}
			continue
		}
		j := merged(chain)
		j.Version = mergedVersion(last.version, len(chain))
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Attempts lists every attempt of this node's jobs on its own, oldest
// first: each as Job shows it under its own ID. A held job's record is
// none of them.
func (s *Submitter) Attempts() []api.Job {
	recs, stored := s.jobs.listed()
	if stored {
		recs = append(recs, s.jobs.storedRecords()...)
	}
	out := make([]api.Job, 0, len(recs))
	for i := range recs {
		if recs[i].rec.placeholder() || recs[i].rec.isArray() {
			continue // a held job's record is no attempt: its first attempt names it as its root
		}
		j := recs[i].rec.API()
		j.Version = recs[i].version
		j.Root = recs[i].rec.Root
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Job returns one job by its ID or a unique prefix of it: under the ID it
// was submitted with, the job through all its attempts; under an
// attempt's own, that attempt.
func (s *Submitter) Job(id string) (api.Job, error) {
	out, _, err := s.view(id, 0, true)
	if err != nil {
		return api.Job{}, err
	}
	s.withHeld(s.ctx, &out)
	return out, nil
}

// WaitJob returns a job once it is at another version than seen, or has
// ended, or when ctx ends, whichever comes first: a client that follows a
// job asks again with the version it last got, and hears of each change as
// it is made instead of on its next poll. At ctx's end it returns the job as
// it is, without error. A change is counted as it is made in memory, before
// it is on disk, and a change that left the job as it was may count too:
// a follower may be woken to find nothing new. A job followed under the ID
// it was submitted with is followed through its attempts: one lost with
// its provider and due to be resumed is queued, not ended.
func (s *Submitter) WaitJob(ctx context.Context, id string, seen uint64) (api.Job, error) {
	for {
		out, changed, err := s.view(id, seen, ctx.Err() != nil)
		if err != nil {
			return api.Job{}, err
		}
		if changed == nil {
			if out.State.Terminal() {
				s.withHeld(ctx, &out)
			}
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
// job's full ID: for a job with several attempts, its last attempt's
// output, or the last checkpoint any attempt took; attempt, when not 0,
// names one attempt (1 for the job as submitted) to read instead.
func (s *Submitter) Output(id string, checkpoint bool, attempt int) (jobID string, root cid.Cid, err error) {
	j, _, err := s.view(id, 0, true)
	if err != nil {
		return "", cid.Undef, err
	}
	which, what := j.Output, "output"
	if checkpoint {
		which, what = j.Checkpoint, "checkpoint"
	}
	// A queued job's reason says what it waits for: room, a resumption,
	// its upstreams.
	state, reason, queued := j.State, j.Reason, j.State == api.JobQueued
	if attempt != 0 {
		if attempt < 0 || attempt > len(j.Attempts) || (len(j.Attempts) == 0 && attempt != 1) {
			n := max(len(j.Attempts), 1)
			return j.ID, cid.Undef, invalid(fmt.Errorf("job %s has no attempt %d (it has %d)", j.ID, attempt, n))
		}
		if len(j.Attempts) > 0 {
			a := j.Attempts[attempt-1]
			which, state, reason, queued = a.Output, a.State, a.Reason, false
			if checkpoint {
				which = a.Checkpoint
			}
			what = fmt.Sprintf("%s in attempt %d", what, attempt)
		}
	}
	if which == "" {
		why := fmt.Sprintf("state %s", state)
		if reason != "" && queued {
			why = reason
		}
		return j.ID, cid.Undef, conflict(fmt.Errorf("job %s has no %s yet (%s)", j.ID, what, why))
	}
	c, err := cid.Decode(which)
	if err != nil {
		return j.ID, cid.Undef, fmt.Errorf("job %s %s %q: %w", j.ID, what, which, err)
	}
	return j.ID, c, nil
}

// FullID resolves a job ID prefix, or a task ID.N of a held array to the
// task's own ID; an unknown one is returned as given.
func (s *Submitter) FullID(id string) string {
	if j, err := s.findShown(id); err == nil {
		return j.id
	}
	return id
}

// withHeld adds to a job what the leases of its attempts held, from the
// ledger: every attempt of the job, every task of an array and each of
// its attempts (ledgerJobsOf), summed by the ledger's one sum.
func (k *kit) withHeld(ctx context.Context, j *api.Job) {
	t, err := k.findShown(j.ID)
	if err != nil {
		return
	}
	ids := k.ledgerJobsOf(t, false).IDs
	h, err := k.d.Ledger.HeldByJobs(ctx, ledger.DefaultPolicy(), ids...)
	if err != nil {
		k.log.Warn("held time of a job", "job", j.ID, "err", err)
		return
	}
	j.Held = HeldOf(h)
	if checks := k.checkIDs(t); len(checks) > 0 {
		if c, err := k.d.Ledger.HeldByJobs(ctx, ledger.DefaultPolicy(), checks...); err == nil {
			j.Held.VerificationGPUHours = c.GPUHours
		}
	}
}

// checkIDs are the ledger's job IDs of the runs that check the results of
// the job whose tracker is t: its other replicas, or its tasks'.
func (k *kit) checkIDs(t *jobTracker) []string {
	var ids []string
	for _, a := range k.attempts(t) {
		ids = k.appendReplicaIDs(ids, a)
		var n int
		var indices []int
		var id string
		a.view(func(r *Record) { id, n, indices = r.ID, r.Tasks, r.taskIndices() })
		for place := range n {
			i := place
			if indices != nil {
				i = indices[place]
			}
			if task := k.jobs.get(market.TaskID(id, i)); task != nil {
				ids = k.appendReplicaIDs(ids, task)
			}
		}
	}
	return ids
}

// HeldOf is a sum of held time as the API shows it.
func HeldOf(h ledger.JobHeld) *api.Held {
	out := &api.Held{HeldMs: h.Held.Milliseconds(), Providers: make([]string, 0, len(h.Providers)),
		GPUHours: h.GPUHours, OwedGPUHours: h.OwedGPUHours, NotOwedGPUHours: h.NotOwedGPUHours, Leases: h.Leases,
		OneSidedGPUHours: h.OneSidedGPUHours, CPUHours: h.CPUHours, OwedCPUHours: h.OwedCPUHours}
	for _, p := range h.Providers {
		out.Providers = append(out.Providers, p.String())
	}
	return out
}

// appendAttemptIDs appends the IDs of the attempts of the job submitted as
// id, first to last, or nothing for a job this node does not hold. It reads
// only the chain, not the job, so that summing an array of 10,000 tasks
// does not build 10,000 views.
func (k *kit) appendAttemptIDs(ids []string, id string) []string {
	j := k.jobs.get(id)
	if j == nil {
		return ids
	}
	for _, a := range k.attempts(j) {
		ids = append(ids, a.id)
	}
	return ids
}
