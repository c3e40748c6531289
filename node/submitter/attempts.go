package submitter

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/e31network/e31/node/api"
)

// A job a user submits keeps its ID for its whole life. Each run of it is
// an attempt: the job as submitted is the first, and each resumption
// (automatic after a lost provider, or e31 resume) is another, with its own
// ID on the network, its own signed declaration, lease and receipts. The
// attempts are chained: each names the job as submitted (Record.Root) and
// the attempt before it (ResumeOf), and each that was resumed names the
// attempt that continues it (Next). Asked for by the ID it was submitted
// under, a job is shown as its last attempt, with the list of them all
// (merged); asked for by an attempt's own ID, that attempt alone.

// attempt renders the record as attempt n of its job.
func (r *Record) attempt(n int) api.Attempt {
	a := api.Attempt{N: n, ID: r.ID, State: r.State, Outcome: string(r.Outcome), Attribution: string(r.Attribution),
		Reason: r.Reason, Submitted: r.Submitted.UTC(), Checkpoint: r.Checkpoint, Output: r.Output}
	if cp := r.Declaration.Output.Checkpoints; cp != nil {
		a.StartedFrom = cp.From
	}
	if r.Market != nil {
		a.Market = r.Market.String()
	}
	if r.Lease != nil {
		a.Provider, a.Lease = r.Lease.Terms.Provider, r.Lease.Terms.ID
	}
	if t := r.stepAt(api.StepRent); !t.IsZero() {
		a.From = &t
	}
	if t := r.stepAt(api.StepRelease); !t.IsZero() {
		a.To = &t
	}
	if a.Reason == "" && !r.terminal() {
		a.Reason = r.Wait
	}
	return a
}

// merged renders a job from its attempts' records, first to last: the
// last attempt's state, steps, provider and output under the ID, name,
// labels and submission time of the first.
func merged(chain []Record) api.Job {
	first, last := &chain[0], &chain[len(chain)-1]
	out := last.API()
	out.ID, out.Name, out.Submitted, out.ResumeOf = first.ID, first.Declaration.Name, first.Submitted.UTC(), ""
	out.Labels = maps.Clone(first.Labels)
	if first.placeholder() {
		// A held job's record is the job's handle, not one of its runs.
		chain = chain[1:]
		if len(chain) == 0 {
			return out
		}
	}
	out.Attempts = make([]api.Attempt, len(chain))
	for i := range chain {
		out.Attempts[i] = chain[i].attempt(i + 1)
		if out.Checkpoint == "" && chain[i].Checkpoint != "" {
			out.Checkpoint = chain[i].Checkpoint
		}
	}
	for i := len(chain) - 1; i >= 0 && out.Checkpoint == ""; i-- {
		out.Checkpoint = chain[i].Checkpoint
	}
	if last.resumeDue() {
		from := "the beginning"
		if out.Checkpoint != "" {
			from = "checkpoint " + out.Checkpoint
		}
		out.State, out.Outcome, out.Attribution, out.ExitCode = api.JobQueued, "", "", nil
		out.Provider, out.Lease, out.GPUs, out.Price = "", "", []string{}, 0
		out.Reason = fmt.Sprintf("resuming: attempt %d ended %s (%s); attempt %d starts from %s",
			len(chain), last.Outcome, last.Reason, len(chain)+1, from)
		if last.retried() {
			out.Reason = fmt.Sprintf("retrying: attempt %d failed (%s); retry %d of %d starts from %s",
				len(chain), last.Reason, last.Retries+1, last.Declaration.Request.Retries, from)
		}
	}
	return out
}

// mergedVersion is the version of a job whose last attempt, the n-th, is
// at version v: it changes with every change of the last attempt and with
// every attempt added.
func mergedVersion(v uint64, n int) uint64 { return v + uint64(n-1)<<32 }

// chain is the handle of a job run as a chain of attempts: a job
// submitted alone, each resumption or retry of it an attempt more. whole:
// the job under the ID it was submitted with (j its first attempt), shown
// as its last attempt with the list of them all; else the attempt j alone,
// under its own ID. Its state is its attempts' records; its lock each
// attempt's tracker's, and the kit's resuming for what continues it.
type chain struct {
	k     *kit
	j     *jobTracker
	whole bool
}

func (c chain) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	if !c.whole {
		var root string
		c.j.view(func(r *Record) { root = r.Root })
		out, changed := c.j.next(seen, done)
		out.Root = root
		return out, changed
	}
	for tries := 0; ; tries++ {
		chain := c.k.attempts(c.j)
		if last := chain[len(chain)-1]; len(chain) > 1 && last.isArrayTracker() {
			// A held array, released: its handle follows the array.
			return c.k.handleOf(last).view(seen, done)
		}
		recs := make([]Record, 0, len(chain))
		for _, a := range chain[:len(chain)-1] {
			recs = append(recs, a.snapshot())
		}
		// An attempt added while the chain was read: read it again (a
		// few times at most; then the chain as read stands).
		out, changed, ok := chain[len(chain)-1].nextMerged(recs, seen, done || tries >= 3)
		if ok {
			return out, changed
		}
	}
}

// withdraw withdraws the job as its last attempt; an attempt named by its
// own ID is that one.
func (c chain) withdraw(ctx context.Context) (api.Job, error) {
	if !c.whole {
		return c.j.withdraw(ctx, true)
	}
	if err := c.k.withdrawLast(ctx, c.j, true); err != nil {
		return api.Job{}, err
	}
	out, _ := c.view(0, true)
	return out, nil
}

// resume submits the next attempt of the job, after its last.
func (c chain) resume(ctx context.Context, fromStart bool) (api.Job, error) {
	return c.k.resumeChain(ctx, c.j.id, fromStart, false)
}

// output is the output of the job's last attempt, or of the attempt named.
func (c chain) output(ctx context.Context) (string, error) {
	at := c.j
	if c.whole {
		at = c.k.lastAttempt(c.j)
	}
	r := at.snapshot()
	if r.Output != "" {
		return r.Output, nil
	}
	state, outcome := r.State, r.Outcome
	if c.whole && r.resumeDue() {
		state, outcome = api.JobQueued, "" // shown queued: it goes on
	}
	return "", fmt.Errorf("job %s has no output (it is %s%s)", c.j.id, state, outcomeSuffix(string(outcome)))
}

// nextMerged is next for the last of a job's attempts, whose earlier ones
// are before: the job merged, when its version is not seen, it has ended or
// left memory, or when done; else a channel closed at the attempt's next
// change. It reports false when the attempt is no longer the last, unless
// done.
func (j *jobTracker) nextMerged(before []Record, seen uint64, done bool) (api.Job, <-chan struct{}, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.Next != "" && !done {
		return api.Job{}, nil, false
	}
	chain := append(before, j.rec.copy())
	out := merged(chain)
	out.Version = mergedVersion(j.versionBase+j.version, len(chain))
	if out.Provider != "" {
		out.Path, out.PathVia = j.dataPath()
		out.StagingRate = j.stagingRate()
	}
	if out.Version != seen || out.State.Terminal() || done || j.evicted {
		return out, nil, true
	}
	if j.changed == nil {
		j.changed = make(chan struct{})
	}
	return api.Job{}, j.changed, true
}

// linkAttempts mends the chains of attempts among the records a previous
// run left: an attempt whose Next was not written before the daemon
// stopped, or one written by a version that did not chain them. It returns
// the records it changed, to be written back.
func linkAttempts(recs []*Record) []*Record {
	byID := make(map[string]*Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	changed := map[string]*Record{}
	var rootOf func(r *Record, depth int) string
	rootOf = func(r *Record, depth int) string {
		if r.Root != "" || r.ResumeOf == "" || depth >= maxAttempts {
			return r.root()
		}
		parent := byID[r.ResumeOf]
		if parent == nil {
			return r.ResumeOf
		}
		return rootOf(parent, depth+1)
	}
	for _, r := range recs {
		if r.ResumeOf == "" {
			continue
		}
		if parent := byID[r.ResumeOf]; parent != nil && parent.Next == "" {
			parent.Next = r.ID
			changed[parent.ID] = parent
		}
		if r.Root == "" {
			r.Root = rootOf(r, 0)
			changed[r.ID] = r
		}
	}
	return slices.Collect(maps.Values(changed))
}
