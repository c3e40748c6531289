package submitter

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
)

// A submitter keeps in memory only the jobs it acts on: the live ones, and
// those ended within endedKeep (a late final receipt or output hand-over
// finds them at once). Older ended jobs are in the record store only, with
// their state in the registry's ended for listing, counting and ID
// prefixes; a request that names one loads it back (registry.get). Memory
// then follows the queue, not the history.
//
// A job leaves memory only between changes (its save and receipts locks
// are free) and only once its record is on disk. A caller still holding
// its tracker afterwards is sent to the loaded copy by update, so no change
// is made to a copy that nobody will write.

// endedKeep is how long an ended job stays in memory.
const endedKeep = 20 * time.Second

// evictEvery is how often ended jobs are moved out of memory.
const evictEvery = 5 * time.Second

func (s *Submitter) evictLoop(ctx context.Context) {
	task.Every(ctx, evictEvery, func(now time.Time) {
		s.jobs.evict(now.Add(-endedKeep))
	})
}

// evict moves out of memory the jobs that ended before cutoff.
func (reg *registry) evict(cutoff time.Time) (n int) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for id, j := range reg.jobs {
		st, ok := j.leave(cutoff)
		if !ok {
			continue
		}
		delete(reg.jobs, id)
		reg.ended[id] = st
		n++
	}
	return n
}

// leave marks the job as out of memory if it ended before cutoff, its
// record is on disk and no change of it is under way, and reports its
// state and whether it left. The caller, the registry, holds its mu and
// takes the job out of its map.
func (j *jobTracker) leave(cutoff time.Time) (api.JobState, bool) {
	// Lock order is receipts, save, the registry's mu, mu: with the
	// registry's mu held only a try.
	if !j.receipts.TryLock() {
		return "", false
	}
	defer j.receipts.Unlock()
	if !j.save.TryLock() {
		return "", false
	}
	defer j.save.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.rec.terminal() || j.dirty || j.endedAt.After(cutoff) {
		return "", false
	}
	j.evicted = true
	if j.changed != nil {
		// A waiter finds the job in the store from here on.
		close(j.changed)
		j.changed = nil
	}
	return j.rec.State, true
}

// load brings a job from the record store back into memory.
func (reg *registry) load(id string) *jobTracker {
	reg.mu.Lock()
	_, stored := reg.ended[id]
	reg.mu.Unlock()
	if !stored {
		return nil // not this node's, or live: memory is the truth
	}
	var r Record
	if ok, err := reg.d.Records.Get(state.PrefixJob, id, &r); err != nil || !ok {
		if err != nil {
			reg.log.Warn("load job", "job", id, "err", err)
		}
		return nil
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if j, ok := reg.jobs[id]; ok {
		return j // loaded meanwhile
	}
	if _, ok := reg.ended[id]; !ok {
		return nil // not this node's, or not ended: memory is the truth
	}
	delete(reg.ended, id)
	j := newJobTracker(reg.parts, &r)
	j.endedAt = time.Now()
	reg.jobs[id] = j
	return j
}

// storedRecords lists the records of the jobs that are in the store only.
func (reg *registry) storedRecords() []versioned {
	reg.mu.Lock()
	stored := maps.Clone(reg.ended)
	reg.mu.Unlock()
	var out []versioned
	err := reg.d.Records.Each(state.PrefixJob, func(b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil // a record that does not decode was reported by Recover
		}
		if _, ok := stored[r.ID]; ok {
			out = append(out, versioned{r, reg.versionBase})
		}
		return nil
	})
	if err != nil {
		reg.log.Warn("list stored jobs", "err", err)
	}
	return out
}
