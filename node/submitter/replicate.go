package submitter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// replicate submits one more run of the check whose first run's record is
// head: the same signed work, as a job of its own on the network, kept
// off the providers named in avoid (those of the runs before it). The
// first run's record lists it, and its own names the first run, so that
// it is shown only within the check.
func (v *verifier) replicate(ctx context.Context, head Record, avoid []string) error {
	decl := head.Declaration
	decl.Labels = maps.Clone(head.Labels)
	values, err := v.k.secrets.load(v.k.secretsRoot(&head))
	if err != nil {
		return err
	}
	if len(decl.Secrets) > 0 && values == nil {
		return fmt.Errorf("the values of its secrets were dropped when the job ended")
	}
	t := v.k.jobs.get(head.ID)
	if t == nil {
		return fmt.Errorf("job %s: %w", head.ID, ErrNotFound)
	}
	// Linked both ways before the replica is broadcast: a proposal for
	// it, or for another run of the check, from a provider of another
	// run is refused from the first (verify_claims.go).
	now := time.Now()
	job, err := v.k.in.submitAs(ctx, decl, nil, nil, values, func(r *Record) error {
		r.ReplicaOf = head.ID
		for _, p := range avoid {
			if p == v.k.d.Self.String() {
				continue
			}
			r.Avoid = append(r.Avoid, p)
			if r.AvoidUntil == nil {
				r.AvoidUntil, r.Avoided = map[string]time.Time{}, map[string]int{}
			}
			r.Avoided[p]++
			r.AvoidUntil[p] = now.Add(v.k.cfg.avoidFor(1))
		}
		return t.update(func(h *Record) error {
			h.Replicas = append(slices.Clone(h.Replicas), r.ID)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("submit a replica: %w", err)
	}
	rt := v.k.jobs.get(job.ID)
	if rt == nil {
		return fmt.Errorf("submit a replica: job %s not registered", job.ID)
	}
	if snap := rt.snapshot(); len(snap.Avoid) > 0 && snap.State == api.JobQueued {
		// The avoids go out with the job's next announcement at once.
		announceAvoiding(ctx, v.k.parts, snap.Market, snap.ID, snap.Envelope, snap.avoiding(now, v.k.cfg.avoidFor(1)))
	}
	v.k.log.Info("replica submitted", "job", head.ID, "replica", job.ID, "avoiding", len(avoid))
	v.watch(head.ID)
	return nil
}

// submitted submits the replicas a job's declaration asks for beside the
// job as submitted, whose record is head (and, for an array, tasks its
// tasks'), and follows the check. An array's replicas are arrays of their
// own, the same signed work, each task the replica of the task of the same
// index; spot checks are drawn as its tasks complete (spot.go).
func (v *verifier) submitted(ctx context.Context, head Record, tasks []*Record) error {
	if !head.isArray() {
		defer v.watch(head.ID)
		for range head.Verify.Replicas - 1 {
			if err := v.replicate(ctx, head, nil); err != nil {
				return err
			}
			if t := v.k.jobs.get(head.ID); t != nil {
				head = t.snapshot()
			}
		}
		return nil
	}
	defer v.watchArray(head.ID)
	if head.Verify.Replicas < 2 {
		return nil
	}
	for _, t := range tasks {
		defer v.watch(t.ID)
	}
	values, err := v.k.secrets.load(v.k.secretsRoot(&head))
	if err != nil {
		return err
	}
	decl := head.Declaration
	decl.Labels = maps.Clone(head.Labels)
	for range head.Verify.Replicas - 1 {
		_, err := v.k.in.submitAs(ctx, decl, nil, nil, values, func(r *Record) error {
			of := head.ID
			if !r.isArray() {
				of = market.TaskID(head.ID, r.Index)
			}
			r.ReplicaOf = of
			t := v.k.jobs.get(of)
			if t == nil {
				return fmt.Errorf("job %s: %w", of, ErrNotFound)
			}
			return t.update(func(h *Record) error {
				h.Replicas = append(slices.Clone(h.Replicas), r.ID)
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("submit a replica of the array: %w", err)
		}
	}
	return nil
}
