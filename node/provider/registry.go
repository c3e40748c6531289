package provider

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
)

// registry is the role's registry of lease runners, by lease ID: the
// leases not yet released, which of them are not yet settled, and the
// withdrawals heard, for a lease whose run has not started yet. A runner
// enters it when its lease is signed (or Recover finds it), leaves it at
// release (Provider.released), and is counted unsettled until its final
// receipt is signed or given up (settledLease).
type registry struct {
	log *slog.Logger // immutable

	// mu guards the fields below. A state lock, memory only: a runner's
	// methods, which take the runner's own lock, are called after it is
	// released, on a copy of what it guards (active).
	mu        sync.Mutex
	leases    map[string]*leaseRunner // the runners of the leases not yet released
	withdrawn map[string]withdrawal   // job -> its withdrawal
	// unsettled are the leases whose runner has not yet settled them
	// (final receipt signed, or given up): a drain for a stop waits for
	// them, so that each submitter has its last checkpoint. settled is
	// closed and replaced at each settlement.
	unsettled map[string]bool
	settled   chan struct{}
}

// withdrawal is a job's withdrawal as this provider saw it.
type withdrawal struct {
	by string
	at time.Time
}

func newRegistry(log *slog.Logger) *registry {
	return &registry{
		log:       log,
		leases:    make(map[string]*leaseRunner),
		withdrawn: make(map[string]withdrawal),
		unsettled: make(map[string]bool),
		settled:   make(chan struct{}),
	}
}

// add registers the runner of a lease, unsettled until its runner says so.
func (g *registry) add(r *leaseRunner) {
	id := r.snapshot().ID()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leases[id] = r
	g.unsettled[id] = true
}

// lookup returns the runner of a lease not yet released, or nil.
func (g *registry) lookup(id string) *leaseRunner {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leases[id]
}

// remove drops a released lease's runner; its settlement is still awaited.
func (g *registry) remove(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.leases, id)
}

// active returns the runners of the leases not yet released.
func (g *registry) active() []*leaseRunner {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Collect(maps.Values(g.leases))
}

// count is how many leases are not yet released.
func (g *registry) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.leases)
}

// settledLease notes that a lease's runner settled it (or gave up on it
// for now), for whoever waits on unsettled.
func (g *registry) settledLease(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.unsettled, id)
	close(g.settled)
	g.settled = make(chan struct{})
}

// idle reports whether every lease is settled, and else returns a channel
// closed at the next settlement.
func (g *registry) idle() (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.unsettled) == 0, g.settled
}

// withdraw remembers a job's withdrawal by its submitter, for a lease
// whose run has not started yet (withdrawnFrom), and stops the leases of
// the job, or of its array's tasks, that the submitter holds.
func (g *registry) withdraw(job string, by peer.ID) {
	g.mu.Lock()
	g.withdrawn[job] = withdrawal{by: by.String(), at: time.Now()}
	leases := slices.Collect(maps.Values(g.leases))
	g.mu.Unlock()
	for _, r := range leases {
		t, cancel := r.stopper()
		if (t.Job == job || taskOf(t.Job) == job) && t.Submitter == by.String() && cancel != nil {
			g.log.Info("withdrawal: stopping lease", "lease", t.ID, "job", job)
			cancel(ErrWithdrawn)
		}
	}
}

// withdrawnBy reports whether sub withdrew job, or the array job is a
// task of.
func (g *registry) withdrawnBy(job, sub string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range []string{job, taskOf(job)} {
		if w, ok := g.withdrawn[id]; ok && w.by == sub {
			return true
		}
	}
	return false
}

// prune forgets withdrawals older than keep.
func (g *registry) prune(now time.Time, keep time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for job, w := range g.withdrawn {
		if now.Sub(w.at) > keep {
			delete(g.withdrawn, job)
		}
	}
}

// preempt stops every lease of this node, each to end preempted: a drain
// in mode, or the end of the node's hours.
func (g *registry) preempt(mode api.DrainMode) {
	cause := preemptCause(mode)
	for _, r := range g.active() {
		t, cancel := r.stopper()
		if cancel != nil {
			g.log.Info("drain: stopping lease", "lease", t.ID, "job", t.Job, "mode", mode)
			cancel(cause)
		}
	}
}
