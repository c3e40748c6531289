package submitter

import (
	"context"
	"fmt"
	"strconv"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
)

// How a gang goes on after a part failed (gangContinues).
type gangContinuation int

const (
	continueNot gangContinuation = iota
	// continueRetry: the job's own failure, with request.retries left.
	continueRetry
	// continuePreempted: the part's provider was taken back (a drain, its
	// hours, its owner's use): no fault of the job's, whatever it
	// declared, up to maxPreemptions times.
	continuePreempted
	// continueResume: lost with its provider, or failed by it, where the
	// gang declared resume: auto with resumes left.
	continueResume
)

// gangContinues says whether and how gang (the gang's record) goes on
// after its part failed ended as it did.
func (failed Record) gangContinues(gang *Record) gangContinuation {
	cp := gang.Declaration.Output.Checkpoints
	switch {
	case failed.retried():
		if gang.Retries < gang.Declaration.Request.Retries {
			return continueRetry
		}
	case failed.Outcome == ledger.OutcomePreempted:
		if gang.Preemptions < maxPreemptions {
			return continuePreempted
		}
	case cp != nil && cp.Resume == market.ResumeAuto && gang.Resumes < cp.MaxResumes:
		return continueResume
	}
	return continueNot
}

// resumeWhole submits the whole gang again, as the next attempt of the
// gang: each part from its own last checkpoint (the checkpoint to resume
// from is a folder of one <rank> folder a part), or from the beginning
// with fromStart. The caller holds resuming.
func (g *gangs) resumeWhole(ctx context.Context, gang *jobTracker, fromStart bool) (api.Job, error) {
	parent := gang.snapshot()
	d := parent.Declaration
	cp := d.Output.Checkpoints
	if !fromStart && cp != nil {
		var entries []content.FolderEntry
		for r, t := range g.members(parent.ID, parent.Tasks) {
			if c, ok := g.partCheckpoint(ctx, t, cp.From, r); ok {
				entries = append(entries, content.FolderEntry{Name: strconv.Itoa(r), Root: c})
			}
		}
		d = fromTheStart(d)
		if len(entries) > 0 {
			folder, err := g.d.Store.Folder(ctx, entries, pinGangCheckpoints(parent.ID))
			if err != nil {
				return api.Job{}, fmt.Errorf("gang %s's checkpoints: %w", parent.ID, err)
			}
			d.Output.Checkpoints.From = folder.String()
		}
	} else {
		d = fromTheStart(d)
	}
	return g.host.submit(ctx, d, &parent, nil, nil)
}

func pinGangCheckpoints(gang string) string { return "checkpoints of gang " + gang }

// partCheckpoint is what part rank of a gang goes on from: its own last
// checkpoint, held here; else, for a part that took none in this attempt,
// the one it started from (its <rank> folder of from, the attempt's own
// checkpoint to resume from); ok is false when there is neither, and the
// part starts again.
func (g *gangs) partCheckpoint(ctx context.Context, t *jobTracker, from string, rank int) (cid.Cid, bool) {
	if t != nil {
		var ck string
		t.view(func(rec *Record) { ck = rec.Checkpoint })
		if c, err := cid.Decode(ck); err == nil {
			if _, err := g.d.Store.Size(ctx, c); err == nil {
				return c, true
			}
			g.log.Warn("a gang part's last checkpoint is not held here: going on from the one before", "part", t.id, "checkpoint", c)
		}
	}
	root, err := cid.Decode(from)
	if err != nil {
		return cid.Undef, false
	}
	c, err := g.d.Store.Resolve(ctx, root, strconv.Itoa(rank))
	if err != nil {
		return cid.Undef, false
	}
	return c, true
}

// resume is e31 resume of a gang, whose last attempt is gang: once every
// part has ended and one did not complete, the whole gang again, each
// part from its own last checkpoint, or from the beginning with
// fromStart.
func (g *gangs) resume(ctx context.Context, gang *jobTracker, fromStart bool) (api.Job, error) {
	g.resuming.Lock()
	defer g.resuming.Unlock()
	// Under the lock: a resumption that came first is the last attempt.
	gang = g.host.lastAttempt(gang)
	rec := gang.snapshot()
	switch e := g.ending(rec.ID, rec.Tasks); {
	case !e.over:
		view, _ := g.host.arrayView(gang, 0, true)
		return api.Job{}, conflict(fmt.Errorf("gang %s is still %s: withdraw it first", rec.root(), view.State))
	case e.outcome == ledger.OutcomeCompleted:
		return api.Job{}, conflict(fmt.Errorf("gang %s completed: nothing to resume", rec.root()))
	}
	if err := gang.update(func(r *Record) error {
		if r.Next != "" {
			return conflict(fmt.Errorf("gang %s was resumed already, as %s", rec.root(), r.Next))
		}
		r.Resumed = true
		return nil
	}); err != nil {
		return api.Job{}, err
	}
	return g.resumeWhole(ctx, gang, fromStart)
}

// withdraw withdraws a gang: under the ID it was submitted with (whole),
// its last attempt, so that one going on after a failure stops too. The
// gang's record says so first, so that a part that fails while the others
// are stopped is no cause to go on.
func (g *gangs) withdraw(ctx context.Context, gang *jobTracker, whole bool) (api.Job, error) {
	g.resuming.Lock()
	last := gang
	if whole {
		last = g.host.lastAttempt(gang)
	}
	err := last.update(func(r *Record) error {
		r.Withdrawn = true
		return nil
	})
	g.resuming.Unlock()
	if err != nil {
		return api.Job{}, err
	}
	if _, err := g.host.withdrawArray(ctx, last); err != nil {
		return api.Job{}, err
	}
	out, _, err := g.host.view(gang.id, 0, true)
	return out, err
}
