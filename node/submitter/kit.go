package submitter

import (
	"context"
	"sync"

	"github.com/e31network/e31/node/api"
)

// kit is what the runners of a job's groups (a chain of attempts, an
// array, a held job, a gang) act through, shared by all of them and by
// the Submitter: the registry of trackers, from which each group's handle
// is made (handleOf), and the order of resumptions. Each group keeps its
// state on its trackers' records; the kit keeps none of its own but the
// resuming lock.
type kit struct {
	*parts           // immutable
	jobs   *registry // the jobs, by ID; see registry for its lock
	in     *intake   // submits new jobs and attempts; immutable after New
	// gangs are the runs of the gangs, and what acts on a gang whole
	// (gangs.go); immutable after New.
	gangs *gangs
	// verify follows the checks of results under way (verifier.go);
	// immutable after New.
	verify *verifier

	// resuming orders the resumptions of jobs, so that an attempt is
	// continued by one attempt at most, and the release of held jobs. An
	// ordering lock, held across a resumption's submit; never waited for
	// under a state lock.
	resuming sync.Mutex
}

// view returns a job as the API shows it (an attempt's own ID: that
// attempt; the ID it was submitted under: the whole job, merged) when it
// is at another version than seen, has ended, or done is set; otherwise a
// channel closed at its next change.
func (k *kit) view(id string, seen uint64, done bool) (api.Job, <-chan struct{}, error) {
	h, err := k.find(id)
	if err != nil {
		return api.Job{}, nil, err
	}
	out, changed := h.view(seen, done)
	return out, changed, nil
}

// outputOf is the CID of the output a job:ID/out source reads: the job's
// (its last attempt's), or, for an array, the folder of its tasks'. It
// reads the records, not the ledger.
func (k *kit) outputOf(ctx context.Context, id string) (string, error) {
	h, err := k.find(id)
	if err != nil {
		return "", err
	}
	return h.output(ctx)
}

// attempts returns the trackers of a job's attempts, first to last, from
// the tracker of its first.
func (k *kit) attempts(first *jobTracker) []*jobTracker {
	out := []*jobTracker{first}
	seen := map[string]bool{first.id: true}
	for cur := first; len(out) < maxAttempts; {
		var next string
		cur.view(func(r *Record) { next = r.Next })
		if next == "" || seen[next] {
			break
		}
		n := k.jobs.get(next)
		if n == nil {
			break
		}
		seen[next] = true
		out = append(out, n)
		cur = n
	}
	return out
}

// lastAttempt returns the tracker of the last attempt of the job j belongs
// to.
func (k *kit) lastAttempt(j *jobTracker) *jobTracker {
	var root string
	j.view(func(r *Record) { root = r.root() })
	first := j
	if root != j.id {
		if f := k.jobs.get(root); f != nil {
			first = f
		}
	}
	chain := k.attempts(first)
	return chain[len(chain)-1]
}
