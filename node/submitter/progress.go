package submitter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// How a job's run comes back to it: the steps its provider reports, the
// checkpoints pulled as they are taken, and the output fetched and checked
// before it is acknowledged.

// maxSkipped bounds the left-out entries a job's record keeps.
const maxSkipped = 20

// event records a step the provider reached (HandleEvent).
func (j *jobTracker) event(ev wire.EventRequest) error {
	now := time.Now()
	return j.apply(func(cur *jobTracker) error {
		cur.lastContact = now
		r := cur.rec
		if ev.Step == api.StepRent && r.Lease != nil && r.Lease.Terms.ID == ev.Lease {
			r.Confirmed = true // the provider recorded a task's lease
		}
		r.reached([]wire.StepAt{{Step: ev.Step, At: ev.At}}, now)
		return nil
	})
}

// awaitCheckpoint waits, up to within, until c (the checkpoint a final
// receipt names, the last the run took) is the job's last pulled one: a
// job that goes on from it must not start from an older one while the pull
// is under way.
func (j *jobTracker) awaitCheckpoint(ctx context.Context, c string, within time.Duration) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		if j.rec.Checkpoint == c {
			j.mu.Unlock()
			return
		}
		if j.changed == nil {
			j.changed = make(chan struct{})
		}
		changed := j.changed
		j.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			j.log.Warn("the final receipt's checkpoint was not pulled in time: going on from the last one pulled", "job", j.id, "checkpoint", c)
			return
		case <-ctx.Done():
			return
		}
	}
}

// pullCheckpoint fetches checkpoint num of the job from its provider and
// keeps it as the job's last, unless a newer one came first; ctx is the
// Submitter's, which ends at Shutdown.
func (j *jobTracker) pullCheckpoint(ctx context.Context, from peer.ID, c cid.Cid, num int) {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.OutputTimeout)
	defer cancel()
	id := j.id
	reason := pinCheckpoint(id, num)
	if err := j.awaitDirect(ctx, from, fmt.Sprintf("pulling checkpoint %d", num)); err != nil {
		j.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
		return
	}
	if _, err := j.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: reason, MaxBytes: j.cfg.MaxOutputBytes, Progress: j.d.Metrics.Returned}); err != nil {
		j.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
		return
	}
	var unpin []pinned
	kept := false
	j.change(func(r *Record) error {
		if num <= r.CheckpointN {
			return errors.New("a newer checkpoint arrived first")
		}
		if old, err := cid.Decode(r.Checkpoint); err == nil {
			unpin = append(unpin, pinned{old, pinCheckpoint(id, r.CheckpointN)})
		}
		r.Checkpoint, r.CheckpointN = c.String(), num
		kept = true
		return nil
	})
	if !kept {
		unpin = append(unpin, pinned{c, reason})
	} else {
		j.log.Info("checkpoint pulled", "job", id, "n", num, "cid", c)
	}
	for _, u := range unpin {
		if err := j.d.Store.Unpin(ctx, u.root, u.reason); err != nil {
			j.log.Warn("unpin superseded checkpoint", "job", id, "cid", u.root, "err", err)
		}
	}
}

type pinned struct {
	root   cid.Cid
	reason string
}

// output fetches and checks the whole output DAG of the job's lease, then
// records it (HandleOutput).
func (j *jobTracker) output(ctx context.Context, from peer.ID, c cid.Cid, req wire.OutputRequest) (any, error) {
	if err := j.awaitDirect(ctx, from, "returning the output"); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	if _, err := j.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: pinOutput(req.Job), MaxBytes: j.cfg.MaxOutputBytes, Progress: j.d.Metrics.Returned}); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	// The fetch takes a while: the job is looked up again, in memory or
	// in the store, and must still be under the lease.
	cur := j.reload(j.id)
	if cur == nil {
		return nil, unknownJob(req.Job)
	}
	if err := cur.checkLease(req.Lease, from); err != nil {
		return nil, err
	}
	if len(req.Skipped) > maxSkipped {
		req.Skipped = req.Skipped[:maxSkipped]
	}
	if err := cur.update(func(r *Record) error {
		r.reached(req.Steps, time.Now())
		r.Output, r.Skipped, r.Wait = c.String(), req.Skipped, ""
		if req.KeptUntil > 0 {
			r.ProviderKeeps = time.UnixMilli(req.KeptUntil)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	j.log.Info("output fetched", "job", req.Job, "cid", c)
	return struct{}{}, nil
}

// awaitDirect waits for a path to the provider that carries data: direct,
// or through a relay whose circuits carry data (one that limits them
// carries a lease's messages but, by design, not its data), saying so in
// the job's status while it waits and why when it gives up, rather than
// stalling in silence.
func (j *jobTracker) awaitDirect(ctx context.Context, from peer.ID, what string) error {
	if j.d.Path == nil {
		return nil
	}
	if path, _ := j.d.Path(from); path != p2p.PathRelayed {
		return nil
	}
	j.change(func(r *Record) error {
		r.Wait = what + ": waiting for a path to the provider that carries data: a hole punch, or a relay that carries data"
		return nil
	})
	_, err := p2p.AwaitDirect(ctx, j.d.Path, from, "the provider", p2p.DirectWait)
	j.change(func(r *Record) error {
		r.Wait = ""
		if err != nil {
			r.Wait = what + ": " + err.Error()
		}
		return nil
	})
	return err
}
