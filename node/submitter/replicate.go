package submitter

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	job, err := v.k.in.submit(ctx, decl, nil, nil, values)
	if err != nil {
		return fmt.Errorf("submit a replica: %w", err)
	}
	rt := v.k.jobs.get(job.ID)
	if rt == nil {
		return fmt.Errorf("submit a replica: job %s not registered", job.ID)
	}
	if err := rt.update(func(r *Record) error { r.ReplicaOf = head.ID; return nil }); err != nil {
		return err
	}
	t := v.k.jobs.get(head.ID)
	if t == nil {
		return fmt.Errorf("job %s: %w", head.ID, ErrNotFound)
	}
	if err := t.update(func(r *Record) error {
		r.Replicas = append(slices.Clone(r.Replicas), job.ID)
		return nil
	}); err != nil {
		return err
	}
	for _, p := range avoid {
		if p == v.k.d.Self.String() {
			continue
		}
		v.mu.Lock()
		v.avoided[[2]string{job.ID, p}] = true
		v.mu.Unlock()
		(failureWatch{rt}).avoid(ctx, p, "", "it ran another replica of the job")
	}
	v.k.log.Info("replica submitted", "job", head.ID, "replica", job.ID, "avoiding", len(avoid))
	v.watch(head.ID)
	return nil
}

// submitted submits the replicas a job's declaration asks for beside the
// job as submitted, whose record is head, and follows the check.
func (v *verifier) submitted(ctx context.Context, head Record) error {
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
