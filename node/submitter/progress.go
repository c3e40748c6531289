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
func (j runPhase) event(ev wire.EventRequest) error {
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
func (j runPhase) awaitCheckpoint(ctx context.Context, c string, within time.Duration) {
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

// Checkpoints are pulled one at a time per lease, as their events come:
// an event that comes while one is pulled waits as the next, replacing any
// that waited before it, so a provider that announces checkpoints faster
// than they can be pulled (or floods them) costs one pull at a time and
// the latest one next. A checkpoint's number must be above every one the
// lease announced before (CodeCheckpointOrder), which is checked before
// any of its bytes move, and each pull is capped at what the job's disk
// can hold (pullCap): a lease whose checkpoint was larger has no more
// pulled (CodeCheckpointTooLarge).

// checkpointPulls are the checkpoints of one lease being pulled and next to
// pull. Guarded by the jobTracker's mu.
type checkpointPulls struct {
	lease   string
	running *checkpointEvent // nil: none is being pulled
	next    *checkpointEvent // nil: none waits
	// oversized is set once a checkpoint of the lease was larger than the
	// job's disk can hold: its provider caps what it imports at the
	// disk, so one that offers more lies, and none of its later
	// checkpoints is pulled.
	oversized bool
}

// checkpointEvent is a checkpoint its provider announced: its root, number
// and when the provider says it was taken.
type checkpointEvent struct {
	root cid.Cid
	n    int
	at   time.Time
}

// queueCheckpoint takes checkpoint ev of the lease for pulling, and
// reports whether a pull is to start (none was running), or refuses it
// with CodeCheckpointOrder: its number is not above the lease's last.
func (j runPhase) queueCheckpoint(lease string, ev checkpointEvent) (start bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := &j.pulls
	if p.lease != lease {
		*p = checkpointPulls{lease: lease}
	}
	if p.oversized {
		return false, p2p.Refuse(wire.CodeCheckpointTooLarge, fmt.Errorf("checkpoint %d of lease %s: an earlier checkpoint of the lease was larger than the job's disk; no more are pulled", ev.n, lease))
	}
	last := 0
	if j.rec.CheckpointLease == lease {
		last = j.rec.CheckpointN
	}
	for _, e := range []*checkpointEvent{p.running, p.next} {
		if e != nil {
			last = max(last, e.n)
		}
	}
	if ev.n <= last {
		return false, p2p.Refuse(wire.CodeCheckpointOrder, fmt.Errorf("checkpoint %d of lease %s: the lease announced checkpoint %d already", ev.n, lease, last))
	}
	if p.running != nil {
		p.next = &ev
		return false, nil
	}
	p.running = &ev
	return true, nil
}

// pulling reports whether checkpoint c of the lease was announced and is
// being pulled or waits to be.
func (j runPhase) pulling(lease, c string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := &j.pulls
	return p.lease == lease && ((p.running != nil && p.running.root.String() == c) || (p.next != nil && p.next.root.String() == c))
}

// pullCheckpoints pulls the lease's announced checkpoints, one at a time,
// until none waits; ctx is the Submitter's, which ends at Shutdown.
func (j runPhase) pullCheckpoints(ctx context.Context, from peer.ID, lease string) {
	for {
		j.mu.Lock()
		ev := j.pulls.running
		j.mu.Unlock()
		if ev == nil {
			return
		}
		j.pullCheckpoint(ctx, from, lease, *ev)
		j.mu.Lock()
		p := &j.pulls
		if p.lease != lease || p.running != ev {
			j.mu.Unlock()
			return // the lease's pulls were reset under it
		}
		p.running, p.next = p.next, nil
		j.mu.Unlock()
	}
}

// pullCap bounds a pull of a job's checkpoint or output: the bytes its
// disk holds (the provider caps the job's files at it), with room for the
// DAG's own structure and its folders and, beside an output, the two logs.
func (j runPhase) pullCap(output bool) int64 {
	j.mu.Lock()
	disk := j.rec.Declaration.Request.DiskBytes()
	j.mu.Unlock()
	extra := uint64(dagAllowance)
	if output {
		extra += logAllowance
	}
	return min(int64(min(disk+disk/64+extra, 1<<62)), j.cfg.MaxOutputBytes)
}

// Allowances of a pull beyond the job's disk: the logs beside an output
// (each of stdout and stderr is kept at most twice exec's cap of 8 MiB,
// 32 MiB in all, with as much again for their DAG), and the folders of a
// DAG of many small files, whose nodes the disk's bytes do not count.
const (
	logAllowance = 64 << 20
	dagAllowance = 4 << 20
)

// pullCheckpoint fetches a checkpoint of the job's lease from its provider
// and keeps it as the job's last, unless a newer one came first.
func (j runPhase) pullCheckpoint(ctx context.Context, from peer.ID, lease string, ev checkpointEvent) {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.OutputTimeout)
	defer cancel()
	id, c, num := j.id, ev.root, ev.n
	reason := pinCheckpoint(id, num)
	if err := j.awaitDirect(ctx, from, fmt.Sprintf("pulling checkpoint %d", num)); err != nil {
		j.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
		return
	}
	if _, err := j.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: reason, MaxBytes: j.pullCap(false), Progress: j.d.Metrics.Returned}); err != nil {
		j.log.Warn("pull checkpoint", "job", id, "n", num, "err", err)
		if errors.Is(err, content.ErrTooLarge) {
			j.mu.Lock()
			if j.pulls.lease == lease {
				j.pulls.oversized, j.pulls.next = true, nil
			}
			j.mu.Unlock()
		}
		return
	}
	var unpin []pinned
	kept := false
	j.change(func(r *Record) error {
		if r.CheckpointLease == lease && num <= r.CheckpointN {
			return errors.New("a newer checkpoint arrived first")
		}
		if old, err := cid.Decode(r.Checkpoint); err == nil {
			unpin = append(unpin, pinned{old, pinCheckpoint(id, r.CheckpointN)})
		}
		r.Checkpoint, r.CheckpointN = c.String(), num
		r.CheckpointLease, r.CheckpointAt = lease, ev.at
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
func (j runPhase) output(ctx context.Context, from peer.ID, c cid.Cid, req wire.OutputRequest) (any, error) {
	if err := j.awaitDirect(ctx, from, "returning the output"); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	if _, err := j.d.Fetcher.Fetch(ctx, from, c, content.FetchOptions{Pin: pinOutput(req.Job), MaxBytes: j.pullCap(true), Progress: j.d.Metrics.Returned}); err != nil {
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
func (j runPhase) awaitDirect(ctx context.Context, from peer.ID, what string) error {
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
