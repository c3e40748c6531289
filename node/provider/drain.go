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
// A lease still staging when the drain stops it ends preempted too. A
// drain is saved (state.PrefixDrain): the node stays drained across a
// restart until e31 undrain.

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
	if p.drain != nil {
		rec.Since = p.drain.Since
	}
	p.drain = &rec
	p.drainGen++
	gen := p.drainGen
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
	same := p.drainGen == gen && p.drain != nil
	p.mu.Unlock()
	if same {
		p.log.Info("graceful drain's deadline: draining quickly what still runs")
		p.preemptAll(api.DrainQuick)
	}
}

// preemptAll stops every lease of this node, each to end preempted.
func (p *Provider) preemptAll(mode api.DrainMode) {
	cause := ErrPreempted
	if mode == api.DrainNow {
		cause = errPreemptedNow
	}
	// A lease's lock is never taken under p.mu (active copies first).
	for _, r := range p.active() {
		t, cancel := r.stopper()
		if cancel != nil {
			p.log.Info("drain: stopping lease", "lease", t.ID, "job", t.Job, "mode", mode)
			cancel(cause)
		}
	}
}

// Undrain ends a drain: the offer takes work again.
func (p *Provider) Undrain() api.Drain {
	p.mu.Lock()
	was := p.drain != nil
	p.drain = nil
	p.drainGen++
	p.mu.Unlock()
	if was {
		if err := p.d.Records.Delete(state.PrefixDrain, drainID); err != nil {
			p.log.Warn("undrain not saved: a restart would drain again", "err", err)
		}
		p.log.Info("undrained: taking work again")
		p.d.OfferChanged()
	}
	return p.DrainStatus()
}

// Draining reports whether the node is drained: its offer says so.
func (p *Provider) Draining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drain != nil
}

// DrainStatus is the drain as the API shows it.
func (p *Provider) DrainStatus() api.Drain {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drain == nil {
		return api.Drain{}
	}
	out := api.Drain{Mode: p.drain.Mode, Since: p.drain.Since.UTC(), Leases: len(p.leases)}
	if !p.drain.Deadline.IsZero() {
		d := p.drain.Deadline.UTC()
		out.Deadline = &d
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
		p.drain = &rec
		p.mu.Unlock()
		p.log.Info("still drained, as before the restart", "mode", rec.Mode, "since", rec.Since)
		return nil
	})
}

// DrainToStop drains the node for a stop of its daemon: running leases go
// on for up to graceful, then what still runs is drained quickly, and it
// returns once no lease is left running or ctx ends. Unlike Drain it is
// not saved: the node takes work again when it starts.
func (p *Provider) DrainToStop(ctx context.Context, graceful time.Duration) {
	p.mu.Lock()
	if p.drain == nil {
		p.drain = &drainRecord{Mode: api.DrainGraceful, Since: time.Now(), Deadline: time.Now().Add(graceful)}
	}
	p.drainGen++
	p.mu.Unlock()
	p.d.OfferChanged()
	idle := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.leases) == 0
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	quick := time.NewTimer(graceful)
	defer quick.Stop()
	for !idle() {
		select {
		case <-ctx.Done():
			return
		case <-quick.C:
			p.log.Info("stopping: draining quickly what still runs")
			p.preemptAll(api.DrainQuick)
		case <-tick.C:
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
