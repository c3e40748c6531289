package provider

import (
	"context"
	"log/slog"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// env is what the provider and each of its parts (the drain, the lease
// runners and their receipts and gang joins, the sourcing, the layouts,
// retention and the hours) share. Set in New, it never changes after: it is
// read without a lock.
type env struct {
	cfg Config
	d   Deps
	log *slog.Logger
	// ctx ends when Shutdown starts: runs stop, loops and retries end.
	ctx context.Context
	// hard ends when Shutdown's patience is spent: what was finishing
	// (importing an output, cleaning up) is abandoned too.
	hard context.Context
	// tasks runs every goroutine of the provider, each lease's runner and
	// each fetch before a lease included: Shutdown waits for them all.
	tasks *task.Group
	// strikes are the submitters struck off (strikes.go); its lock is a
	// leaf.
	strikes *strikes
	// disk tells the room of each job's disk (room.go).
	disk diskGrants
}

// Provider runs the leases this node provides, from proposal to settlement.
// The role keeps its parts, each with its own state and lock: the GPUs
// held and the proposals in flight (holds.go), the registry of lease
// runners (registry.go), what drains the node (drain.go), staging from
// many sources and before the lease (sources.go, prestage.go) and the
// inputs laid out (laidout.go). Each signed lease is carried through its
// life by a leaseRunner of its own (runner.go), which the Provider
// registers under the lease's ID and starts on its task group.
//
// No part's lock is taken under another's, but for the drain's ordering
// lock, under which the drain takes its own state lock only.
type Provider struct {
	*env // immutable after New
	// drain is what drains the node; its exported methods (Drain,
	// Undrain, DrainStatus, Draining, Reclaim, Return, DrainToStop) are
	// the Provider's. Immutable pointer; its own locks.
	*drain
	// cancel ends env.ctx, hardStop env.hard.
	cancel   context.CancelFunc
	hardStop context.CancelFunc

	// The parts below are set in New and never replaced; each has a lock
	// of its own.
	holds  *holds    // the GPUs held and the proposals in flight
	leases *registry // the runners of the leases not yet released
	inputs layouts   // the inputs laid out for the runs (laidout.go)
	src    sourcing  // staging from many sources and before the lease

	retention *retention // what settled leases keep, released in time
	hours     openHours  // the contributor's hours, kept to
}

// New returns a provider; Recover loads what a previous run left.
func New(cfg Config, d Deps) *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	if d.OfferChanged == nil {
		d.OfferChanged = func() {}
	}
	e := &env{cfg: cfg, d: d, log: d.Log, ctx: ctx, hard: hard, tasks: &task.Group{}, strikes: &strikes{records: d.Records, log: d.Log},
		disk: diskGrants{room: d.Room, maxJobDisk: cfg.MaxJobDisk, log: d.Log}}
	leases := newRegistry(d.Log)
	p := &Provider{
		env: e, cancel: cancel, hardStop: hardStop,
		drain:  &drain{env: e, leases: leases},
		holds:  newHolds(),
		leases: leases,
		inputs: layouts{
			env:       e,
			laidOut:   make(map[string]map[string]bool),
			layingOut: make(map[string]chan struct{}),
		},
	}
	p.src.env, p.src.inputs = e, &p.inputs
	p.retention = &retention{env: e, inputs: &p.inputs}
	p.hours = openHours{env: e, leases: leases}
	// A lease's run recovers its own panics and releases (handling.go);
	// this is for every other goroutine of the provider, a lease's release
	// included.
	p.tasks.OnPanic = func(v any, stack []byte) { p.countPanic("task", v, stack) }
	return p
}

// Shutdown stops every lease and waits for their goroutines until ctx ends;
// then it abandons what is still finishing and waits for that to return.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.cancel()
	err := p.tasks.Wait(ctx)
	if err != nil {
		p.log.Warn("leases still finishing at shutdown: abandoning them", "err", err)
	}
	p.hardStop()
	_ = p.tasks.Wait(context.Background())
	return err
}

// GPUs are this node's GPUs as its offer shows them. A GPU held for a
// proposal in flight still shows free: only a signed lease changes the
// offer, so that every peer's view changes once, with the lease.
func (p *Provider) GPUs() []market.GPU {
	leased := p.holds.leased()
	out := make([]market.GPU, 0, len(p.d.GPUs))
	for _, g := range p.d.GPUs {
		model := g.Model
		if p.d.Misbehave != nil {
			model = p.d.Misbehave.Model(model)
		}
		out = append(out, market.GPU{Index: g.Index, UUID: g.UUID, Model: model, MemoryBytes: g.MemoryBytes, Free: !leased[g.UUID]})
	}
	return out
}

// Counts are the provider's figures for metrics.
type Counts struct {
	GPUs, Held, Leases int
}

// Counts returns how many GPUs there are, how many signed leases hold, and
// how many leases are active.
func (p *Provider) Counts() Counts {
	return Counts{GPUs: len(p.d.GPUs), Held: len(p.holds.leased()), Leases: p.leases.count()}
}

// Images reports whether this provider runs jobs in their own image: the
// Images flag of its offer.
func (p *Provider) Images() bool { return p.d.Runner != nil && p.d.Images != nil }

// Takes reports whether this provider runs the work as to its image: one
// only if it can run images, one without only if it does not require one.
// Match filters the same way from the offer; this guards against a view
// that disagrees.
func (p *Provider) Takes(w market.Work) bool {
	if w.Image != "" {
		return p.Images()
	}
	return !p.cfg.RequireImage
}

// Window is what the offer says of the hours at now: closed outside them,
// else when the open window ends (Unix ms; 0 when it never does, or the
// node has no hours).
func (p *Provider) Window(now time.Time) (closed bool, openUntil int64) {
	return p.hours.window(now)
}

// Disk is what the offer says of the disk: the largest request.disk this
// node can grant now, and why it lends none, if it does not.
func (p *Provider) Disk() (maxJobDisk uint64, noDisk string) { return p.disk.offered() }

// TakesCPUJobs reports whether this node takes jobs that ask for no GPU:
// the offer says so.
func (p *Provider) TakesCPUJobs() bool { return !p.cfg.NoCPUJobs }

// Silent reports whether this provider, misbehaving on purpose, publishes
// nothing more (Deps.Misbehave).
func (p *Provider) Silent() bool { return p.d.Misbehave != nil && p.d.Misbehave.Silent() }

// released is a runner's word to its role that its lease is released: its
// GPUs go back into the offer and the runner leaves the registry. It is
// the one call a runner makes into the role (leaseRunner.onRelease).
func (p *Provider) released(t wire.LeaseTerms) {
	p.holds.released(t)
	p.leases.remove(t.ID)
	p.d.OfferChanged()
}

// HeldGPUs are the UUIDs of the GPUs leases hold now, in a map of the
// caller's own.
func (p *Provider) HeldGPUs() map[string]bool {
	return p.holds.all()
}

// Withdraw stops the lease of a job this node provides, if any, on the
// submitter's word.
func (p *Provider) Withdraw(job string, by peer.ID) { p.leases.withdraw(job, by) }

// taskOf is the array a job is a task of, or "".
func taskOf(job string) string {
	a, _, _ := market.SplitTaskID(job)
	return a
}

// Prune forgets withdrawals older than keep.
func (p *Provider) Prune(now time.Time, keep time.Duration) { p.leases.prune(now, keep) }

// StopLease stops a lease of this node whose submitter released it before
// its run began (it gave up waiting and put the job back in the queue): the
// work would be owed nothing and its output never fetched.
func (p *Provider) StopLease(id string, by peer.ID) {
	r := p.leases.lookup(id)
	if r == nil {
		return
	}
	t, cancel := r.stopper()
	if t.Submitter == by.String() && cancel != nil {
		p.log.Info("released by the submitter before the run: stopping lease", "lease", id, "job", t.Job)
		cancel(ErrReleasedUnrun)
	}
}
