package submitter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// A job declared in a class market (node.MarketClasses) waits there while
// every box that fits it is busy. market.Route sent it where the digests
// showed room, but a digest is up to a minute old and every submitter
// reads the same ones: the room may be gone when the job arrives. A job
// that has waited Config.MoveAfter (market.MoveAfter when unset) in a
// market whose digest shows no room for it, while another fitting
// market's digest shows some, is moved there (market.Move): it is
// declared again, in the new market, as the next attempt of its chain,
// and the attempt it leaves ends withdrawn. That attempt never held a
// lease, so nothing is owed for it.
//
// Never a double lease: the attempt is marked as moving (MovedTo) on
// disk before the new declaration exists, and from then on every
// proposal for it is refused (proposal.go). Only a queued attempt with no
// lease is moved, under the lock every continuation of a chain takes. A
// move whose new declaration cannot be made clears the mark, and the job
// stays where it is. A stop between the mark and the end is finished at
// the next pass: an attempt marked as moving that has a next attempt
// ends withdrawn; one without is unmarked.
//
// A job moves at most maxMoves times, and then waits where it is. Arrays
// and their tasks, gangs, runs that check another (replicas,
// comparators), jobs with secrets and held jobs are not moved: each
// stays in the market it was declared in.

// maxMoves bounds the moves of one job.
const maxMoves = 3

// moveEvery is how often the queued jobs are looked at for a move.
const moveEvery = 15 * time.Second

// mover moves queued jobs between class markets (see above).
type mover struct{ k *kit }

// loop looks for jobs to move every moveEvery until ctx ends.
func (m mover) loop(ctx context.Context) {
	task.Every(ctx, moveEvery, func(now time.Time) { m.pass(ctx, now) })
}

// pass finishes the moves a stop interrupted, then moves every job due to
// move at now; it returns how many it moved.
func (m mover) pass(ctx context.Context, now time.Time) int {
	mk := m.k.d.Markets
	if mk == nil || mk.Follow == nil || mk.Digests == nil {
		return 0
	}
	digests := mk.Digests.Digests()
	draw := mk.Draw
	if draw == nil {
		draw = rand.IntN
	}
	moved := 0
	for _, j := range m.k.jobs.live() {
		if m.finish(ctx, j) {
			continue
		}
		to, waited, ok := m.due(j, now, digests, draw)
		if !ok {
			continue
		}
		switch err := m.move(ctx, j, to, waited); {
		case errors.Is(err, errSkip):
		case err != nil:
			m.k.log.Warn("job not moved: it stays in its market", "job", j.id, "to", to.String(), "err", err)
		default:
			moved++
		}
	}
	return moved
}

// due says where job j should move at now, on the digests known, and how
// long it has waited where it is; ok is false when it stays.
func (m mover) due(j *jobTracker, now time.Time, digests []market.Digest, draw func(int) int) (to p2p.Shard, waited time.Duration, ok bool) {
	r := j.snapshot()
	if !movable(&r) || isTask(j.id) {
		return p2p.Shard{}, 0, false
	}
	waited = now.Sub(r.Submitted)
	for _, here := range digests {
		if !sameMarket(shardOfDigest(here), *r.Market) {
			continue
		}
		after := market.Duration(m.k.cfg.MoveAfter.Milliseconds())
		d, ok := market.Move(r.Declaration.Request, sourceRoots(r.Declaration), market.Duration(waited.Milliseconds()), after, here, digests, draw)
		if !ok {
			return p2p.Shard{}, 0, false
		}
		return shardOfDigest(d), waited, true
	}
	return p2p.Shard{}, 0, false // no digest of its market: nothing to weigh
}

// movable reports whether the attempt r may move (see above).
func movable(r *Record) bool {
	return r.Market != nil && r.State == api.JobQueued && r.Lease == nil && r.MovedTo == nil &&
		!r.placeholder() && !r.isArray() && r.Array == "" && r.Declaration.Request.Nodes <= 1 &&
		r.Verify == nil && r.ReplicaOf == "" && len(r.Declaration.Secrets) == 0 && r.Moves < maxMoves
}

// shardOfDigest is the market a digest is of.
func shardOfDigest(d market.Digest) p2p.Shard {
	return p2p.Shard{Class: string(d.Class), Index: d.Index, Count: max(d.Count, 1)}
}

// move moves job j to market to (see above); errSkip when j is no longer
// the queued last attempt of its job.
func (m mover) move(ctx context.Context, j *jobTracker, to p2p.Shard, waited time.Duration) error {
	k := m.k
	k.resuming.Lock()
	defer k.resuming.Unlock()
	if k.lastAttempt(j) != j {
		return errSkip
	}
	err := j.update(func(r *Record) error {
		if !movable(r) {
			return errSkip
		}
		r.MovedTo = &to
		return nil
	})
	if err != nil {
		return err
	}
	parent := j.snapshot()
	next, err := k.in.submit(ctx, parent.Declaration, &parent, nil, nil)
	if err != nil {
		if uerr := j.update(func(r *Record) error { r.MovedTo = nil; return nil }); uerr != nil {
			return fmt.Errorf("declare it in %s: %w (and unmark it: %w)", to, err, uerr)
		}
		return fmt.Errorf("declare it in %s: %w", to, err)
	}
	m.end(ctx, j, next.ID, fmt.Sprintf("moved to market %s: it waited %s in market %s, whose digest showed no room for it", to, waited.Round(time.Second), parent.Market))
	k.log.Info("job moved to another market", "job", j.id, "next", next.ID, "from", parent.Market.String(), "to", to.String(), "waited", waited.Round(time.Second))
	return nil
}

// end ends attempt j, moving, withdrawn as moved on to next, and tells the
// market it leaves.
func (m mover) end(ctx context.Context, j *jobTracker, next, reason string) {
	var from *p2p.Shard
	err := j.update(func(r *Record) error {
		if r.MovedTo == nil || r.State != api.JobQueued {
			return errSkip
		}
		from = r.Market
		r.State, r.Wait, r.Next = api.JobWithdrawn, "", next
		r.setEnding(ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter, Reason: reason})
		return nil
	})
	switch {
	case errors.Is(err, errSkip):
		return
	case err != nil:
		// The mark stays: the next pass ends it.
		m.k.log.Warn("moved job's attempt not ended on disk", "job", j.id, "next", next, "err", err)
		return
	}
	if err := j.publishJob(ctx, from, wire.KindWithdrawal, wire.WithdrawalBody{Job: j.id}); err != nil {
		m.k.log.Warn("announce a moved job's withdrawal", "job", j.id, "err", err)
	}
}

// finish completes a move of j that a stop interrupted (see above), and
// reports whether j was one.
func (m mover) finish(ctx context.Context, j *jobTracker) bool {
	r := j.snapshot()
	if r.MovedTo == nil || r.State != api.JobQueued {
		return false
	}
	m.k.resuming.Lock()
	defer m.k.resuming.Unlock()
	if r.Next != "" {
		m.end(ctx, j, r.Next, fmt.Sprintf("moved to market %s", r.MovedTo))
		return true
	}
	if err := j.update(func(r *Record) error {
		if r.MovedTo == nil || r.State != api.JobQueued || r.Next != "" {
			return errSkip
		}
		r.MovedTo = nil
		return nil
	}); err != nil && !errors.Is(err, errSkip) {
		m.k.log.Warn("unmark a job whose move did not happen", "job", j.id, "err", err)
	}
	return true
}
