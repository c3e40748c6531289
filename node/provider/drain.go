package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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

// drain is what drains the node, as the API shows it and the offer says
// it. Its exported methods are the Provider's (it is embedded there).
//
// The owner's drain is kept in the record store as well as in memory, and
// the two must end alike: a drain and an undrain that race must not leave
// the store drained after the API answered undrained, or a restart would
// drain the node again. So each change to the owner's drain is made in
// memory and written under save, one change at a time, and what Drain and
// Undrain answer is read before save is let go: the store ends as the last
// answer said.
type drain struct {
	*env // immutable, shared with the role
	// leases are the role's runners, which a quick drain stops and whose
	// settlement a stop awaits; immutable, with a lock of its own, never
	// taken under mu.
	leases *registry

	// save orders the writes of the owner's drain record. An ordering
	// lock: it spans Records.Put and Delete on purpose; mu is taken under
	// it, never the reverse, and nothing else is called under it.
	save sync.Mutex
	// mu guards drains. A state lock, memory only.
	mu     sync.Mutex
	drains drains
}

// drains are what drains the node, each nil when it does not; the
// records are replaced, never changed in place, so that a pointer read
// under drain.mu may be read after it.
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
// countersigned after it stopped what ran. nil when none holds.
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

// preempting is the cause a lease signed now is stopped with (drains.preempting).
func (d *drain) preempting(now time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drains.preempting(now)
}

// current is the drain the API shows now, and who made it (drains.current).
func (d *drain) current() (*drainRecord, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drains.current()
}

// Drain drains this node in mode (a later call changes the mode: a
// graceful drain made quick), quickly at deadline if one is given for a
// graceful drain. It saves the drain, tells the offer, and stops the
// runs a quick drain stops.
func (d *drain) Drain(mode api.DrainMode, deadline time.Time) (api.Drain, error) {
	switch mode {
	case api.DrainGraceful, api.DrainQuick, api.DrainNow:
	default:
		return api.Drain{}, fmt.Errorf("drain mode %q: want graceful, quick or now", mode)
	}
	d.save.Lock()
	d.mu.Lock()
	rec := drainRecord{Mode: mode, Since: time.Now(), Deadline: deadline}
	if d.drains.owner != nil {
		rec.Since = d.drains.owner.Since
	}
	d.drains.owner = &rec
	d.drains.gen++
	gen := d.drains.gen
	d.mu.Unlock()
	if err := d.d.Records.Put(state.PrefixDrain, drainID, rec); err != nil {
		d.log.Warn("drain not saved: a restart would take work again", "err", err)
	}
	shown, by := d.current()
	d.save.Unlock()
	d.log.Info("draining", "mode", mode, "deadline", deadline)
	d.d.OfferChanged()
	switch {
	case mode != api.DrainGraceful:
		d.leases.preempt(mode)
	case !deadline.IsZero():
		d.tasks.Go(func() { d.drainAt(gen, deadline) })
	}
	return d.status(shown, by), nil
}

// drainAt drains quickly at deadline whatever a graceful drain left
// running, unless the drain changed since (gen) or the node stops first.
func (d *drain) drainAt(gen uint64, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-d.ctx.Done():
		return
	case <-t.C:
	}
	d.mu.Lock()
	same := d.drains.gen == gen && d.drains.owner != nil
	d.mu.Unlock()
	if same {
		d.log.Info("graceful drain's deadline: draining quickly what still runs")
		d.leases.preempt(api.DrainQuick)
	}
}

// preemptCause is the cause a drain in mode stops a lease with.
func preemptCause(mode api.DrainMode) error {
	if mode == api.DrainNow {
		return errPreemptedNow
	}
	return ErrPreempted
}

// Undrain ends the owner's drain: the offer takes work again, unless the
// reclaim watcher or a stop still drains the node.
func (d *drain) Undrain() api.Drain {
	d.save.Lock()
	d.mu.Lock()
	was := d.drains.owner != nil
	d.drains.owner = nil
	d.drains.gen++
	d.mu.Unlock()
	if was {
		if err := d.d.Records.Delete(state.PrefixDrain, drainID); err != nil {
			d.log.Warn("undrain not saved: a restart would drain again", "err", err)
		}
	}
	shown, by := d.current()
	d.save.Unlock()
	if was {
		d.log.Info("undrained by the owner")
		d.d.OfferChanged()
	}
	return d.status(shown, by)
}

// Reclaim drains the node quickly for its owner, who started using a GPU
// (node/reclaim): what runs ends preempted and goes on elsewhere. It is
// not saved, and only Return lifts it.
func (d *drain) Reclaim(reason string) {
	d.mu.Lock()
	first := d.drains.reclaim == nil
	if first {
		d.drains.reclaim = &drainRecord{Mode: api.DrainQuick, Since: time.Now(), Reason: reason}
	}
	d.mu.Unlock()
	if !first {
		return
	}
	d.log.Info("reclaimed by the owner: draining quickly", "why", reason)
	d.d.OfferChanged()
	d.leases.preempt(api.DrainQuick)
}

// Return ends a Reclaim: the owner has left the GPUs alone. The node
// takes work again unless its owner drained it too.
func (d *drain) Return() {
	d.mu.Lock()
	was := d.drains.reclaim != nil
	d.drains.reclaim = nil
	d.mu.Unlock()
	if was {
		d.log.Info("the owner left the GPUs alone: taking work again, unless drained")
		d.d.OfferChanged()
	}
}

// Draining reports whether the node is drained: its offer says so.
func (d *drain) Draining() bool {
	shown, _ := d.current()
	return shown != nil
}

// DrainStatus is the drain as the API shows it.
func (d *drain) DrainStatus() api.Drain {
	return d.status(d.current())
}

// status is the API's view of the drain shown, made by by, with the
// leases not yet released.
func (d *drain) status(shown *drainRecord, by string) api.Drain {
	if shown == nil {
		return api.Drain{}
	}
	out := api.Drain{Mode: shown.Mode, Since: shown.Since.UTC(), By: by, Reason: shown.Reason, Leases: d.leases.count()}
	if !shown.Deadline.IsZero() {
		dl := shown.Deadline.UTC()
		out.Deadline = &dl
	}
	return out
}

// recover loads a drain a previous run saved.
func (d *drain) recover() error {
	return d.d.Records.Each(state.PrefixDrain, func(b []byte) error {
		var rec drainRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("drain record: %w", err)
		}
		d.mu.Lock()
		d.drains.owner = &rec
		d.mu.Unlock()
		d.log.Info("still drained, as before the restart", "mode", rec.Mode, "since", rec.Since)
		return nil
	})
}

// DrainToStop drains the node for a stop of its daemon: running leases go
// on for up to graceful, then what still runs is drained quickly, and it
// returns once every lease is settled (its final receipt signed, after its
// submitter pulled the last checkpoint) or ctx ends. Unlike Drain it is
// not saved: the node takes work again when it starts.
func (d *drain) DrainToStop(ctx context.Context, graceful time.Duration) {
	d.mu.Lock()
	d.drains.stop = &drainRecord{Mode: api.DrainGraceful, Since: time.Now(), Deadline: time.Now().Add(graceful), Reason: "the daemon is stopping"}
	d.mu.Unlock()
	d.d.OfferChanged()
	quick := time.NewTimer(graceful)
	defer quick.Stop()
	for {
		idle, settled := d.leases.idle()
		if idle {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-quick.C:
			d.log.Info("stopping: draining quickly what still runs")
			d.leases.preempt(api.DrainQuick)
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
