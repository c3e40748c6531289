package provider

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// env is what the provider and each of its parts (the lease runners, the
// sourcing, the layouts) share. Set in New, it never changes after: it is
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
}

// hold is what holds a GPU: a proposal in flight (lease empty) or a signed
// lease.
type hold struct {
	job   string
	lease string
}

// Provider runs the leases this node provides, from proposal to settlement.
// What is the role's lives here: which GPUs are held, the proposals in
// flight, withdrawals, staging from many sources and before the lease, the
// inputs laid out, restarts and retention. Each signed lease is carried
// through its life by a leaseRunner of its own (runner.go), which the
// Provider registers under the lease's ID and starts on its task group.
type Provider struct {
	*env // immutable after New
	// cancel ends env.ctx, hardStop env.hard.
	cancel   context.CancelFunc
	hardStop context.CancelFunc

	// mu guards the fields below. It is a state lock, never held across
	// I/O or a call into another part; no runner's lock is taken under it.
	mu        sync.Mutex
	held      map[string]hold         // GPU UUID -> what holds it
	proposing map[string]bool         // jobs with a proposal of ours in flight
	leases    map[string]*leaseRunner // the runners of the leases not yet released
	withdrawn map[string]withdrawal
	// unsettled are the leases whose runner has not yet settled them
	// (final receipt signed, or given up): a drain for a stop waits for
	// them, so that each submitter has its last checkpoint. settled is
	// closed and replaced at each settlement.
	unsettled map[string]bool
	settled   chan struct{}
	drains    drains // what drains the node (drain.go)

	inputs layouts  // the inputs laid out for the runs (laidout.go)
	src    sourcing // staging from many sources and before the lease

	// sweeping is set while a retention sweep for room on the disk runs
	// (room.go), so that a short disk starts one at a time.
	sweeping atomic.Bool
}

// withdrawal is a job's withdrawal as this provider saw it.
type withdrawal struct {
	by string
	at time.Time
}

// New returns a provider; Recover loads what a previous run left.
func New(cfg Config, d Deps) *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	if d.OfferChanged == nil {
		d.OfferChanged = func() {}
	}
	e := &env{cfg: cfg, d: d, log: d.Log, ctx: ctx, hard: hard, tasks: &task.Group{}, strikes: &strikes{records: d.Records, log: d.Log}}
	p := &Provider{
		env: e, cancel: cancel, hardStop: hardStop,
		held:      make(map[string]hold),
		proposing: make(map[string]bool),
		leases:    make(map[string]*leaseRunner),
		withdrawn: make(map[string]withdrawal),
		unsettled: make(map[string]bool),
		settled:   make(chan struct{}),
		inputs: layouts{
			env:       e,
			laidOut:   make(map[string]map[string]bool),
			layingOut: make(map[string]chan struct{}),
		},
	}
	p.src.env, p.src.inputs = e, &p.inputs
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
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]market.GPU, 0, len(p.d.GPUs))
	for _, g := range p.d.GPUs {
		model := g.Model
		if p.d.Misbehave != nil {
			model = p.d.Misbehave.Model(model)
		}
		out = append(out, market.GPU{Index: g.Index, UUID: g.UUID, Model: model, MemoryBytes: g.MemoryBytes, Free: p.held[g.UUID].lease == ""})
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
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Counts{GPUs: len(p.d.GPUs), Leases: len(p.leases)}
	for _, h := range p.held {
		if h.lease != "" {
			c.Held++
		}
	}
	return c
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

// Silent reports whether this provider, misbehaving on purpose, publishes
// nothing more (Deps.Misbehave).
func (p *Provider) Silent() bool { return p.d.Misbehave != nil && p.d.Misbehave.Silent() }

// active returns the runners of the leases not yet released.
func (p *Provider) active() []*leaseRunner {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.leases))
}

// released is a runner's word to its role that its lease is released: its
// GPUs go back into the offer and the runner leaves the registry. It is
// the one call a runner makes into the role (leaseRunner.onRelease).
func (p *Provider) released(t wire.LeaseTerms) {
	p.mu.Lock()
	for _, g := range t.GPUs {
		if p.held[g].lease == t.ID {
			delete(p.held, g)
		}
	}
	delete(p.leases, t.ID)
	p.mu.Unlock()
	p.d.OfferChanged()
}

// HeldGPUs are the UUIDs of the GPUs leases hold now, in a map of the
// caller's own.
func (p *Provider) HeldGPUs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.held))
	for g := range p.held {
		out[g] = true
	}
	return out
}

// settledLease notes that a lease's runner settled it (or gave up on it
// for now), for whoever waits on unsettled.
func (p *Provider) settledLease(id string) {
	p.mu.Lock()
	delete(p.unsettled, id)
	close(p.settled)
	p.settled = make(chan struct{})
	p.mu.Unlock()
}

// Withdraw stops the lease of a job this node provides, if any, on the
// submitter's word.
func (p *Provider) Withdraw(job string, by peer.ID) {
	p.mu.Lock()
	// Remembered too, for a lease whose run has not started yet: start
	// checks it.
	p.withdrawn[job] = withdrawal{by: by.String(), at: time.Now()}
	leases := slices.Collect(maps.Values(p.leases))
	p.mu.Unlock()
	// A lease's lock is never taken under p.mu.
	for _, r := range leases {
		t, cancel := r.stopper()
		if (t.Job == job || taskOf(t.Job) == job) && t.Submitter == by.String() && cancel != nil {
			p.log.Info("withdrawal: stopping lease", "lease", t.ID, "job", job)
			cancel(ErrWithdrawn)
		}
	}
}

// taskOf is the array a job is a task of, or "".
func taskOf(job string) string {
	a, _, _ := market.SplitTaskID(job)
	return a
}

// Prune forgets withdrawals older than keep.
func (p *Provider) Prune(now time.Time, keep time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for job, w := range p.withdrawn {
		if now.Sub(w.at) > keep {
			delete(p.withdrawn, job)
		}
	}
}

// StopLease stops a lease of this node whose submitter released it before
// its run began (it gave up waiting and put the job back in the queue): the
// work would be owed nothing and its output never fetched.
func (p *Provider) StopLease(id string, by peer.ID) {
	p.mu.Lock()
	r := p.leases[id]
	p.mu.Unlock()
	if r == nil {
		return
	}
	t, cancel := r.stopper()
	if t.Submitter == by.String() && cancel != nil {
		p.log.Info("released by the submitter before the run: stopping lease", "lease", id, "job", t.Job)
		cancel(ErrReleasedUnrun)
	}
}
