package submitter

import (
	"fmt"
	"iter"
	"maps"
	"strings"
	"sync"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// registry is the Submitter's map of its jobs, job ID to tracker: the
// tracker of each job in memory, and the state of each job that is in the
// record store only (memory.go says which are where). It finds a job by
// its ID or a unique prefix, loading one from the store when asked for it.
type registry struct {
	*parts // immutable

	// mu guards jobs and ended. A state lock: never held across I/O. It
	// is taken before a tracker's mu (a tracker is marked evicted as it
	// leaves jobs, and a count sees each job once), never while one is
	// held.
	mu sync.Mutex
	// jobs holds the jobs this node submitted that are live or ended
	// recently; the others are in the record store only (memory.go).
	jobs map[string]*jobTracker
	// ended holds the state of every job that is in the store only.
	ended map[string]api.JobState
}

func newRegistry(p *parts) *registry {
	return &registry{parts: p, jobs: make(map[string]*jobTracker), ended: make(map[string]api.JobState)}
}

// get returns a job, from memory or the record store, or nil.
func (reg *registry) get(id string) *jobTracker {
	if j := reg.inMemory(id); j != nil {
		return j
	}
	return reg.load(id)
}

// inMemory returns a job in memory, or nil.
func (reg *registry) inMemory(id string) *jobTracker {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.jobs[id]
}

// live returns the jobs in memory, by ID: a copy, to act on each after the
// registry's lock is released.
func (reg *registry) live() map[string]*jobTracker {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return maps.Clone(reg.jobs)
}

// add puts a new job in memory.
func (reg *registry) add(j *jobTracker) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.jobs[j.id] = j
}

// leased finds this node's job under a lease from the given provider.
func (reg *registry) leased(id, lease string, provider peer.ID) (*jobTracker, error) {
	j := reg.get(id)
	if j == nil {
		return nil, unknownJob(id)
	}
	if err := j.checkLease(lease, provider); err != nil {
		return nil, err
	}
	return j, nil
}

// unknownJob refuses a provider's message about a job this node does not
// know.
func unknownJob(id string) error {
	return p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("job %s: %w", id, ErrNotFound))
}

// find resolves a job ID or a unique prefix of one, among the jobs in
// memory and those in the store only, and returns the job.
func (reg *registry) find(id string) (*jobTracker, error) {
	reg.mu.Lock()
	full, err := reg.resolve(id)
	reg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if j := reg.get(full); j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
}

// resolve finds the full ID of a job from a unique prefix. The caller
// holds reg.mu.
func (reg *registry) resolve(id string) (string, error) {
	if _, ok := reg.jobs[id]; ok {
		return id, nil
	}
	if _, ok := reg.ended[id]; ok {
		return id, nil
	}
	found := ""
	for _, ids := range []iter.Seq[string]{maps.Keys(reg.jobs), maps.Keys(reg.ended)} {
		for k := range ids {
			if id == "" || !strings.HasPrefix(k, id) {
				continue
			}
			if _, _, task := market.SplitTaskID(k); task && !strings.Contains(id, ".") {
				continue // a prefix of an array's ID names the array, not its tasks
			}
			if found != "" {
				return "", invalid(fmt.Errorf("job ID prefix %q is ambiguous", id))
			}
			found = k
		}
	}
	if found == "" {
		return "", fmt.Errorf("job %s: %w (only jobs submitted from this node are known here)", id, ErrNotFound)
	}
	return found, nil
}

// fullID resolves a job ID prefix; an unknown one is returned as given.
func (reg *registry) fullID(id string) string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if full, err := reg.resolve(id); err == nil {
		return full
	}
	return id
}

// versioned is a copy of a job's record with its version.
type versioned struct {
	rec     Record
	version uint64
}

// listed copies the records of the jobs in memory, with their versions,
// and says whether any are in the store only.
func (reg *registry) listed() (out []versioned, stored bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	out = make([]versioned, 0, len(reg.jobs)+len(reg.ended))
	for _, j := range reg.jobs {
		j.mu.Lock()
		out = append(out, versioned{j.rec.copy(), j.versionBase + j.version})
		j.mu.Unlock()
	}
	return out, len(reg.ended) > 0
}

// counts returns how many jobs are in each state, each job counted once
// wherever it is.
func (reg *registry) counts() map[api.JobState]int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	out := make(map[api.JobState]int)
	for _, j := range reg.jobs {
		out[j.state()]++
	}
	for _, st := range reg.ended {
		out[st]++
	}
	return out
}

// restore puts in the registry the records a previous run left: an ended
// job in the store only, any other in memory (replacing one already
// there).
func (reg *registry) restore(recs []*Record) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, r := range recs {
		if r.terminal() && !r.resumeDue() {
			// Ended before this start: listed from the store, loaded
			// when asked for.
			reg.ended[r.ID] = r.State
			continue
		}
		reg.jobs[r.ID] = newJobTracker(reg.parts, r)
	}
}
