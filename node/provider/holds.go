package provider

import (
	"sync"

	"github.com/e31network/e31/node/wire"
)

// holds are the GPUs this node holds, each for a proposal in flight or a
// signed lease, and the jobs it has a proposal in flight for. Propose
// claims a job's GPUs before it proposes; a declined or lapsed proposal
// gives them back, a signed lease keeps them until its release.
type holds struct {
	// mu guards the maps below; a state lock, memory only.
	mu        sync.Mutex
	held      map[string]hold // GPU UUID -> what holds it
	proposing map[string]bool // jobs with a proposal of ours in flight
}

// hold is what holds a GPU: a proposal in flight (lease empty) or a signed
// lease.
type hold struct {
	job   string
	lease string
}

func newHolds() *holds {
	return &holds{held: make(map[string]hold), proposing: make(map[string]bool)}
}

// claim holds gpus for a proposal of job, and reports whether it could:
// not while the job has a proposal in flight or a lease here, nor while
// one of the GPUs is held. A pass whose view does not yet hold this
// provider's own lease on the job (an epoch's cut, taken before a pass
// between epochs leased it) must not lease it twice.
func (h *holds) claim(job string, gpus []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proposing[job] {
		return false
	}
	for _, x := range h.held {
		if x.job == job {
			return false
		}
	}
	for _, g := range gpus {
		if _, taken := h.held[g]; taken {
			return false
		}
	}
	for _, g := range gpus {
		h.held[g] = hold{job: job}
	}
	h.proposing[job] = true
	return true
}

// unclaim gives back what a proposal of job that came to nothing held.
func (h *holds) unclaim(job string, gpus []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.proposing, job)
	for _, g := range gpus {
		if x := h.held[g]; x.lease == "" && x.job == job {
			delete(h.held, g)
		}
	}
}

// proposed notes that job's proposal is over: its lease is signed.
func (h *holds) proposed(job string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.proposing, job)
}

// signed holds a signed lease's GPUs for it.
func (h *holds) signed(t wire.LeaseTerms) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range t.GPUs {
		h.held[g] = hold{job: t.Job, lease: t.ID}
	}
}

// released gives back the GPUs a released lease held.
func (h *holds) released(t wire.LeaseTerms) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range t.GPUs {
		if h.held[g].lease == t.ID {
			delete(h.held, g)
		}
	}
}

// leased are the UUIDs of the GPUs signed leases hold, in a map of the
// caller's own.
func (h *holds) leased() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.held))
	for g, x := range h.held {
		if x.lease != "" {
			out[g] = true
		}
	}
	return out
}

// all are the UUIDs of every GPU held, for a proposal or a lease, in a map
// of the caller's own.
func (h *holds) all() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.held))
	for g := range h.held {
		out[g] = true
	}
	return out
}
