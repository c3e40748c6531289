package submitter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The verifier follows every check of results under way: the replicas of
// a job (replicas.go) and the spot checks of an array's tasks (spot.go).
// Each round it keeps a check's queued runs off the providers of its
// others (an avoid, announced, and the proposal check, claims.go), and
// once every run of a check has come back it compares them (compare.go):
// all alike, the job completes with that output; two that differ, a third
// runs on yet another provider; a majority, it wins, and each run that
// returned something else lost: its lease gets the signed verdict (not
// owed), and its provider this node's distrust (distrust.go). No majority
// of three: the job fails, "replicas disagree", naming who returned what.

// verifyEvery is how often the verifier looks at the checks under way.
const verifyEvery = time.Second

type verifier struct {
	k        *kit // immutable
	distrust *distrust
	// drawArray draws an array's tasks for spot checks (spot.go); over
	// says the array needs no more. Immutable after New.
	drawArray func(ctx context.Context, id string) (over bool)

	// mu guards the fields below. A state lock: never held across I/O or
	// another part's method.
	mu sync.Mutex
	// groups are the first runs (a job's, or a task's) of the checks not
	// over; arrays the arrays whose tasks are drawn for spot checks.
	groups map[string]bool
	arrays map[string]bool
	// avoided are the avoids announced in this run, replica and provider.
	avoided map[[2]string]bool
	// summaries is each group's last summary, so that a change of one bumps
	// ver and closes changed, which the views of checks wait on.
	summaries map[string]string
	// records are the providers' records as the ledger gave them at
	// recordsAt: proposals for a job with verify.min_record read them,
	// and the ledger is read again only once they are recordsFor old.
	records   map[peer.ID]ledger.ProviderRecord
	recordsAt time.Time
	ver       uint64
	changed   chan struct{}
}

func newVerifier(k *kit) *verifier {
	return &verifier{k: k, distrust: newDistrust(k.parts), groups: map[string]bool{}, arrays: map[string]bool{},
		avoided: map[[2]string]bool{}, summaries: map[string]string{}, changed: make(chan struct{})}
}

// watch follows the check whose first run is id.
func (v *verifier) watch(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.groups[id] = true
}

// watchArray draws the tasks of the array id for spot checks.
func (v *verifier) watchArray(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.arrays[id] = true
}

// version counts the changes of the checks' summaries in this run.
func (v *verifier) version() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ver
}

// next is the channel closed at the next change of any check: each
// round reads every run of every check, so a change of a run reaches the
// views within a round.
func (v *verifier) next() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// note records a check's summary, waking the views when it changed.
func (v *verifier) note(id, summary string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.summaries[id] == summary {
		return
	}
	v.summaries[id] = summary
	v.ver++
	close(v.changed)
	v.changed = make(chan struct{})
}

// loop runs the rounds until ctx ends, after finding the checks a
// previous run left.
func (v *verifier) loop(ctx context.Context) {
	v.recover()
	task.Every(ctx, verifyEvery, func(time.Time) { v.round(ctx) })
}

// recover follows again the checks and spot-checked arrays not over.
func (v *verifier) recover() {
	recs, stored := v.k.jobs.listed()
	if stored {
		recs = append(recs, v.k.jobs.storedRecords()...)
	}
	for _, r := range recs {
		switch {
		case r.rec.Verdict != nil:
		case r.rec.isArray():
			if r.rec.Verify.Checks() {
				v.watchArray(r.rec.ID)
			}
		case r.rec.replicated() || len(r.rec.Replicas) > 0:
			v.watch(r.rec.ID)
		}
	}
}

func (v *verifier) round(ctx context.Context) {
	v.mu.Lock()
	groups, arrays := mapKeys(v.groups), mapKeys(v.arrays)
	v.mu.Unlock()
	for _, id := range arrays {
		if over := v.drawArray(ctx, id); over {
			v.mu.Lock()
			delete(v.arrays, id)
			v.mu.Unlock()
		}
	}
	for _, id := range groups {
		if over := v.step(ctx, id); over {
			v.mu.Lock()
			delete(v.groups, id)
			v.mu.Unlock()
		}
	}
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// run is one run of a check as a round reads it: its tracker and its
// last attempt's record.
type run struct {
	t    *jobTracker
	last Record
}

// runs reads the runs of the check whose first run's record is head.
func (v *verifier) runs(head Record) ([]run, bool) {
	ids := append([]string{head.ID}, head.Replicas...)
	out := make([]run, 0, len(ids))
	for _, id := range ids {
		t := v.k.jobs.get(id)
		if t == nil {
			return nil, false
		}
		out = append(out, run{t, v.k.lastAttempt(t).snapshot()})
	}
	return out, true
}

// step does what the check whose first run is id needs now; over says it
// needs nothing more.
func (v *verifier) step(ctx context.Context, id string) (over bool) {
	t := v.k.jobs.get(id)
	if t == nil {
		return true
	}
	head := t.snapshot()
	if head.Verdict != nil {
		return true
	}
	runs, ok := v.runs(head)
	if !ok {
		return false // a replica's record not loaded yet: a stop during its submit
	}
	if head.RerunFor != "" {
		// The task ran again, its provider caught by another check: the
		// run this check was to compare is gone, and so is the check.
		v.abandon(ctx, t, runs[1:], "the task ran again elsewhere: its provider "+head.RerunFor+" lost a check of results")
		return true
	}
	v.note(id, summary(runs))
	v.keepApart(ctx, runs)
	for _, r := range runs {
		if !r.last.terminal() || r.last.resumeDue() {
			return false
		}
	}
	mode := verifyOf(v.k, head)
	results := make([]ReplicaRun, len(runs))
	for i, r := range runs {
		res, err := (comparer{v.k.parts}).result(ctx, r.last, mode)
		if err != nil {
			v.k.log.Warn("compare replica: tried again next round", "job", id, "replica", r.last.ID, "err", err)
			return false
		}
		results[i] = res
	}
	if mode.Mode() == ledger.CompareCommand {
		if done, err := v.byCommand(ctx, t, head, mode, results); err != nil || !done {
			if err != nil {
				v.k.log.Warn("compare replicas by the user's comparator: tried again next round", "job", id, "err", err)
			}
			return false
		}
	}
	d := decide(results)
	if d.State == "" { // two that differ: a third runs
		if err := v.replicate(ctx, head, providersOf(results)); err != nil {
			d = Verdict{State: verdictDisagreed, Results: results,
				Reason: fmt.Sprintf("replicas disagree and a third could not run (%v): %s", err, whoReturned(results))}
		} else {
			return false
		}
	}
	d.At, d.Mode = time.Now(), mode.Mode()
	v.settle(ctx, t, head, d)
	return true
}

// keepApart keeps each queued run off the providers the others hold or
// held: an avoid for it, announced once in this run; the proposal check
// refuses such a provider whatever the view says.
func (v *verifier) keepApart(ctx context.Context, runs []run) {
	for i, r := range runs {
		if r.last.State != api.JobQueued {
			continue
		}
		for k, o := range runs {
			p := o.last.provider()
			if k == i || p == "" || p == v.k.d.Self.String() || slices.Contains(r.last.Avoid, p) {
				continue
			}
			key := [2]string{r.last.ID, p}
			v.mu.Lock()
			done := v.avoided[key]
			v.avoided[key] = true
			v.mu.Unlock()
			if !done {
				(failureWatch{v.k.lastAttempt(r.t)}).avoid(ctx, p, "", "it runs another replica of the job")
			}
		}
	}
}

// summary is what the views of a check show of its runs, to tell a change.
func summary(runs []run) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "%s %s %s %s;", r.last.ID, r.last.State, r.last.Outcome, r.last.provider())
	}
	return b.String()
}
