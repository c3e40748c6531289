package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
)

// A contributor takes its machine back by draining it (e31 drain): the
// offer says the node is draining, Match gives it nothing new, and what
// runs ends as the mode says.
//
//   - graceful: running leases go on to their end; at the deadline, if one
//     is given, whatever still runs is drained quickly.
//   - quick: each run gets SIGTERM and its grace to write a last
//     checkpoint, which is imported and offered to the submitter as every
//     checkpoint is; the lease ends preempted, attributed to the provider,
//     and the submitter resumes the job elsewhere from that checkpoint.
//   - now: quick without the grace.
//
// A lease still staging when the drain stops it ends preempted too. Three
// things drain a node, each on its own terms (api.Drain.By):
//
//   - its owner (Drain, Undrain): saved (state.PrefixDrain), so the node
//     stays drained across a restart until e31 undrain;
//   - the reclaim watcher (Reclaim, Return; node/reclaim), when the owner
//     starts using a GPU: quick, not saved, lifted by the watcher alone once
//     the GPUs are left alone, never the owner's drain;
//   - a stop of the daemon (DrainToStop): graceful for a while, then
//     quick, not saved.
//
// The node takes work while none of the three holds.

// ErrPreempted is the cause given to a lease's context when this node is
// drained quickly.
var ErrPreempted = errors.New("preempted: the provider's owner is taking it back")

// errPreemptedNow is ErrPreempted for a drain that leaves the run no grace.
var errPreemptedNow = fmt.Errorf("%w, at once: %w", ErrPreempted, exec.ErrStopNow)

// drainID is the one drain record's ID.
const drainID = "self"

// drainRecord is a drain, as saved.
type drainRecord struct {
	Mode     api.DrainMode `json:"mode"`
	Since    time.Time     `json:"since"`
	Deadline time.Time     `json:"deadline,omitzero"`
	// Reason says why the node drained itself; empty for the owner's.
	Reason string `json:"reason,omitempty"`
}

// drains are what drains the node, each nil when it does not; guarded by
// Provider.mu.
type drains struct {
	owner, reclaim, stop *drainRecord
	// gen counts the owner's drains, so that a graceful drain's deadline
	// acts only on the drain that set it.
	gen uint64
}

// current is the drain the API shows, the owner's first, and who made
// it; nil when the node takes work.
func (d *drains) current() (*drainRecord, string) {
	switch {
	case d.owner != nil:
		return d.owner, api.DrainByOwner
	case d.reclaim != nil:
		return d.reclaim, api.DrainByReclaim
	case d.stop != nil:
		return d.stop, api.DrainByStop
	}
	return nil, ""
}

// preempting is the cause a lease signed now is stopped with, where a
// quick drain holds (the owner's quick or now, a reclaim, a stop past its
// graceful time): a proposal in flight when the drain came may still be
// countersigned after it stopped what ran. nil when none holds. The caller
// holds Provider.mu.
func (d *drains) preempting(now time.Time) error {
	switch {
	case d.owner != nil && (d.owner.Mode == api.DrainQuick || d.owner.Mode == api.DrainNow || !d.owner.Deadline.IsZero() && now.After(d.owner.Deadline)):
		return preemptCause(d.owner.Mode)
	case d.reclaim != nil:
		return ErrPreempted
	case d.stop != nil && now.After(d.stop.Deadline):
		return ErrPreempted
	}
	return nil
}

// Drain drains this node in mode (a later call changes the mode: a
// graceful drain made quick), quickly at deadline if one is given for a
// graceful drain. It saves the drain, tells the offer, and stops the
// runs a quick drain stops.
func (p *Provider) Drain(mode api.DrainMode, deadline time.Time) (api.Drain, error) {
	switch mode {
	case api.DrainGraceful, api.DrainQuick, api.DrainNow:
	default:
		return api.Drain{}, fmt.Errorf("drain mode %q: want graceful, quick or now", mode)
	}
	p.mu.Lock()
	rec := drainRecord{Mode: mode, Since: time.Now(), Deadline: deadline}
	if p.drains.owner != nil {
		rec.Since = p.drains.owner.Since
	}
	p.drains.owner = &rec
	p.drains.gen++
	gen := p.drains.gen
	p.mu.Unlock()
	if err := p.d.Records.Put(state.PrefixDrain, drainID, rec); err != nil {
		p.log.Warn("drain not saved: a restart would take work again", "err", err)
	}
	p.log.Info("draining", "mode", mode, "deadline", deadline)
	p.d.OfferChanged()
	switch {
	case mode != api.DrainGraceful:
		p.preemptAll(mode)
	case !deadline.IsZero():
		p.tasks.Go(func() { p.drainAt(gen, deadline) })
	}
	return p.DrainStatus(), nil
}

// drainAt drains quickly at deadline whatever a graceful drain left
// running, unless the drain changed since (gen) or the node stops first.
func (p *Provider) drainAt(gen uint64, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.ctx.Done():
		return
	case <-t.C:
	}
	p.mu.Lock()
	same := p.drains.gen == gen && p.drains.owner != nil
	p.mu.Unlock()
	if same {
		p.log.Info("graceful drain's deadline: draining quickly what still runs")
		p.preemptAll(api.DrainQuick)
	}
}

// preemptCause is the cause a drain in mode stops a lease with.
func preemptCause(mode api.DrainMode) error {
	if mode == api.DrainNow {
		return errPreemptedNow
	}
	return ErrPreempted
}

// preemptAll stops every lease of this node, each to end preempted.
func (p *Provider) preemptAll(mode api.DrainMode) {
	cause := preemptCause(mode)
	// A lease's lock is never taken under p.mu (active copies first).
	for _, r := range p.active() {
		t, cancel := r.stopper()
		if cancel != nil {
			p.log.Info("drain: stopping lease", "lease", t.ID, "job", t.Job, "mode", mode)
			cancel(cause)
		}
	}
}

// Undrain ends the owner's drain: the offer takes work again, unless the
// reclaim watcher or a stop still drains the node.
func (p *Provider) Undrain() api.Drain {
	p.mu.Lock()
	was := p.drains.owner != nil
	p.drains.owner = nil
	p.drains.gen++
	p.mu.Unlock()
	if was {
		if err := p.d.Records.Delete(state.PrefixDrain, drainID); err != nil {
			p.log.Warn("undrain not saved: a restart would drain again", "err", err)
		}
		p.log.Info("undrained by the owner")
		p.d.OfferChanged()
	}
	return p.DrainStatus()
}

// Reclaim drains the node quickly for its owner, who started using a GPU
// (node/reclaim): what runs ends preempted and goes on elsewhere. It is
// not saved, and only Return lifts it.
func (p *Provider) Reclaim(reason string) {
	p.mu.Lock()
	first := p.drains.reclaim == nil
	if first {
		p.drains.reclaim = &drainRecord{Mode: api.DrainQuick, Since: time.Now(), Reason: reason}
	}
	p.mu.Unlock()
	if !first {
		return
	}
	p.log.Info("reclaimed by the owner: draining quickly", "why", reason)
	p.d.OfferChanged()
	p.preemptAll(api.DrainQuick)
}

// Return ends a Reclaim: the owner has left the GPUs alone. The node
// takes work again unless its owner drained it too.
func (p *Provider) Return() {
	p.mu.Lock()
	was := p.drains.reclaim != nil
	p.drains.reclaim = nil
	p.mu.Unlock()
	if was {
		p.log.Info("the owner left the GPUs alone: taking work again, unless drained")
		p.d.OfferChanged()
	}
}

// Draining reports whether the node is drained: its offer says so.
func (p *Provider) Draining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, _ := p.drains.current()
	return d != nil
}

// DrainStatus is the drain as the API shows it.
func (p *Provider) DrainStatus() api.Drain {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, by := p.drains.current()
	if d == nil {
		return api.Drain{}
	}
	out := api.Drain{Mode: d.Mode, Since: d.Since.UTC(), By: by, Reason: d.Reason, Leases: len(p.leases)}
	if !d.Deadline.IsZero() {
		dl := d.Deadline.UTC()
		out.Deadline = &dl
	}
	return out
}

// recoverDrain loads a drain a previous run saved.
func (p *Provider) recoverDrain() error {
	return p.d.Records.Each(state.PrefixDrain, func(b []byte) error {
		var rec drainRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("drain record: %w", err)
		}
		p.mu.Lock()
		p.drains.owner = &rec
		p.mu.Unlock()
		p.log.Info("still drained, as before the restart", "mode", rec.Mode, "since", rec.Since)
		return nil
	})
}

// DrainToStop drains the node for a stop of its daemon: running leases go
// on for up to graceful, then what still runs is drained quickly, and it
// returns once every lease is settled (its final receipt signed, after its
// submitter pulled the last checkpoint) or ctx ends. Unlike Drain it is
// not saved: the node takes work again when it starts.
func (p *Provider) DrainToStop(ctx context.Context, graceful time.Duration) {
	p.mu.Lock()
	p.drains.stop = &drainRecord{Mode: api.DrainGraceful, Since: time.Now(), Deadline: time.Now().Add(graceful), Reason: "the daemon is stopping"}
	p.mu.Unlock()
	p.d.OfferChanged()
	quick := time.NewTimer(graceful)
	defer quick.Stop()
	for {
		p.mu.Lock()
		idle, settled := len(p.unsettled) == 0, p.settled
		p.mu.Unlock()
		if idle {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-quick.C:
			p.log.Info("stopping: draining quickly what still runs")
			p.preemptAll(api.DrainQuick)
		case <-settled:
		}
	}
}

// keptUpTo is when the last checkpoint of a preempted lease was taken, for
// its final receipt: the policy charges the run up to it, the work the job
// goes on from, and not after (ledger.Policy.OwedToCheckpoint). Zero for
// other endings, and for a preempted lease that kept no checkpoint.
func (r Record) keptUpTo() time.Time {
	if r.Outcome != ledger.OutcomePreempted || r.Checkpoint == "" || r.CheckpointAt.Before(r.Start) {
		return time.Time{}
	}
	return r.CheckpointAt
}
