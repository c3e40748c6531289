package submitter

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
)

// A submitter keeps in memory only the jobs it acts on: the live ones, and
// those ended within endedKeep (a late final receipt or output hand-over
// finds them at once). Older ended jobs are in the record store only, with
// their state in Submitter.ended for listing, counting and ID prefixes; a
// request that names one loads it back (get). Memory then follows the
// queue, not the history.
//
// A job leaves memory only between changes (its save and receipts locks
// are free) and only once its record is on disk. A caller still holding
// it afterwards is sent to the loaded copy by update, so no change is made
// to a copy that nobody will write.

// endedKeep is how long an ended job stays in memory.
const endedKeep = 20 * time.Second

// evictEvery is how often ended jobs are moved out of memory.
const evictEvery = 5 * time.Second

func (s *Submitter) evictLoop(ctx context.Context) {
	t := time.NewTicker(evictEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.evict(now.Add(-endedKeep))
		}
	}
}

// evict moves out of memory the jobs that ended before cutoff.
func (s *Submitter) evict(cutoff time.Time) (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, j := range s.jobs {
		if !j.rec.terminal() || j.dirty || j.endedAt.After(cutoff) {
			continue
		}
		// Lock order is receipts, save, mu: with mu held only a try.
		if !j.receipts.TryLock() {
			continue
		}
		if !j.save.TryLock() {
			j.receipts.Unlock()
			continue
		}
		delete(s.jobs, id)
		s.ended[id] = j.rec.State
		j.evicted = true
		if j.changed != nil {
			// A waiter finds the job in the store from here on.
			close(j.changed)
			j.changed = nil
		}
		j.save.Unlock()
		j.receipts.Unlock()
		n++
	}
	return n
}

// load brings a job from the record store back into memory.
func (s *Submitter) load(id string) *job {
	s.mu.Lock()
	_, stored := s.ended[id]
	s.mu.Unlock()
	if !stored {
		return nil // not this node's, or live: memory is the truth
	}
	var r Record
	if ok, err := s.d.Records.Get(state.PrefixJob, id, &r); err != nil || !ok {
		if err != nil {
			s.log.Warn("load job", "job", id, "err", err)
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return j // loaded meanwhile
	}
	if _, ok := s.ended[id]; !ok {
		return nil // not this node's, or not ended: memory is the truth
	}
	delete(s.ended, id)
	j := &job{id: id, rec: &r, endedAt: time.Now()}
	s.jobs[id] = j
	return j
}

// storedJobs lists the jobs that are in the store only.
func (s *Submitter) storedJobs() []api.Job {
	s.mu.Lock()
	stored := maps.Clone(s.ended)
	s.mu.Unlock()
	var out []api.Job
	err := s.d.Records.Each(state.PrefixJob, func(b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil // a record that does not decode was reported by Recover
		}
		if _, ok := stored[r.ID]; ok {
			a := r.API()
			a.Version = s.versionBase
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("list stored jobs", "err", err)
	}
	return out
}
