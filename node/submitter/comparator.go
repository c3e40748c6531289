package submitter

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// The user's comparator (verify.compare.command): for each pair of runs
// of a check that returned an output, a small job of its own runs the
// command over the two output folders, mounted at /a and /b, on a
// provider that ran neither (nor any run of the check: the claims check
// refuses those, verify_claims.go), and its exit status is the answer:
// 0, they agree; a failure of its own, they differ. Each run is then
// compared as the run it agrees with most (a majority of the runs is
// needed to win, decide), so that a tolerance the user wrote, not the
// bytes, says which outputs are the same result.

// comparatorLimit bounds a comparator job's run.
const comparatorLimit = 10 * time.Minute

// comparePair names a pair of runs in Record.Comparators.
func comparePair(a, b string) string { return a + " " + b }

// byCommand sets the Compared value of the results that returned an
// output from the comparators' answers, starting those not run yet; done
// is false while one is still to answer.
func (v *verifier) byCommand(ctx context.Context, t *jobTracker, head Record, vf *market.Verify, results []ReplicaRun) (done bool, err error) {
	var outs []int
	for i, r := range results {
		if r.hasOutput() {
			outs = append(outs, i)
		}
	}
	agree := map[[2]int]bool{}
	done = true
	for x, i := range outs {
		for _, j := range outs[x+1:] {
			key := comparePair(results[i].Job, results[j].Job)
			id := head.Comparators[key]
			if id == "" {
				if id, err = v.startComparator(ctx, t, head, vf, results[i], results[j], key); err != nil {
					return false, err
				}
				done = false
				continue
			}
			c := v.k.jobs.get(id)
			if c == nil {
				return false, fmt.Errorf("comparator %s: %w", id, ErrNotFound)
			}
			last := v.k.lastAttempt(c).snapshot()
			if !last.terminal() || last.resumeDue() {
				done = false
				continue
			}
			agree[[2]int{i, j}] = last.Outcome == ledger.OutcomeCompleted
		}
	}
	if !done {
		return false, nil
	}
	// Each run as the run it agrees with most, itself included.
	best, most := -1, 0
	for _, i := range outs {
		n := 1
		for _, j := range outs {
			if agree[[2]int{min(i, j), max(i, j)}] {
				n++
			}
		}
		if n > most {
			best, most = i, n
		}
	}
	for _, i := range outs {
		if i == best || agree[[2]int{min(i, best), max(i, best)}] {
			results[i].Compared = "agrees with " + results[best].Job
		} else {
			results[i].Compared = "differs from " + results[best].Job
		}
	}
	return true, nil
}

// startComparator submits the comparator job of the pair a, b and records
// it on the check's first record.
func (v *verifier) startComparator(ctx context.Context, t *jobTracker, head Record, vf *market.Verify, a, b ReplicaRun, key string) (string, error) {
	d := market.NewDeclaration("compare "+head.Declaration.Name, vf.Compare.Command, 0, market.Duration(comparatorLimit.Milliseconds()),
		[]market.Input{{Source: a.Output + "/out", Mount: "/a"}, {Source: b.Output + "/out", Mount: "/b"}})
	d.Work.Image = vf.Compare.Image
	d.Labels = maps.Clone(head.Labels)
	job, err := v.k.in.submitAs(ctx, d, nil, nil, nil, func(r *Record) error {
		r.ReplicaOf = head.ID
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("submit the comparator: %w", err)
	}
	if err := t.update(func(r *Record) error {
		c := maps.Clone(r.Comparators)
		if c == nil {
			c = map[string]string{}
		}
		c[key] = job.ID
		r.Comparators = c
		return nil
	}); err != nil {
		return "", err
	}
	v.k.log.Info("comparator submitted", "job", head.ID, "comparator", job.ID, "runs", key)
	return job.ID, nil
}
