package submitter

import (
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// jobTracker follows one job this node submitted through its life, as a
// nomad task runner follows its task: it holds the job's record and the
// state this run keeps beside it, the locks that order its changes, the
// version that followers of the job wait on, and its persistence (every
// change goes through update, which writes the record after it). It
// handles what the job's provider sends once the Submitter has routed it
// here: a proposal (proposal.go), and, through its phase types
// (phases.go), the steps, checkpoints and output of the run (runPhase,
// progress.go) and its receipts (receiptPhase, receipt.go); the provider
// watch (lossWatch, watch.go) and the failure checks (failureWatch,
// avoid.go and requeue.go) act on the job through them too.
//
// Lock order: receipts, save, then the registry's mu or the stage's mu,
// then mu. mu is the innermost but for the tallies' leaf locks, which
// bump takes to note a task's change (tally.go).
type jobTracker struct {
	id     string // rec.ID; immutable
	*parts        // immutable

	// receipts serialises the receipts of the job's lease, which each link
	// to the last. An ordering lock: it is held across the ledger's reads
	// of the lease, its Append (or RecordDispute) and the record write
	// that follows, since the next receipt may only be checked against a
	// chain that holds this one. It is taken before save.
	receipts sync.Mutex
	// save orders the writes of rec: a snapshot taken later is never
	// overwritten by one taken earlier. An ordering lock: it is held
	// across Records.Put. It is taken before mu; the registry, holding its
	// own mu, only tries it (evict).
	save sync.Mutex

	// mu guards the fields below. A state lock: never held across I/O, a
	// log line or a call into another part of the node; what a change
	// needs to write is copied under it and written after.
	mu  sync.Mutex
	rec *Record
	// endedAt is when this run saw the job end; not persisted.
	endedAt time.Time
	// evicted is set when the job leaves memory: a holder of this value
	// then reaches the job through the store (update).
	evicted bool
	// dirty is set while the last write of rec failed: the record in
	// memory is the truth, and the job does not leave memory.
	dirty bool
	// lastContact is when the provider was last heard from; not persisted:
	// after a restart the provider gets a full window again.
	lastContact time.Time
	// assigned is, by provider, what this node's Match said of the job
	// while it was queued, and passes how many of this node's Match
	// passes held the job queued; not persisted.
	assigned map[string]*assignment
	// reached names the providers this node reached for the job after
	// they went without proposing (avoid.go); not persisted.
	reached map[string]bool
	// notes are, by provider, what the job waits on once matched to it,
	// in place of matchedWait: what this node learnt of it (avoid.go).
	notes    map[string]string
	passes   int
	lastPass uint64 // the Submitter's pass that last counted in passes
	// matchedPass is the Submitter's last pass that assigned the job to a
	// provider while it was queued, 0 if none: still queued at the next,
	// that pass's round was lost (Metrics.RoundsLost).
	matchedPass uint64
	// pulls are the checkpoints of the lease's provider being pulled and
	// next to pull (progress.go); not persisted.
	pulls checkpointPulls
	// version counts the changes of rec in this run, and changed is
	// closed at the next one, for those waiting on it (nil while no one
	// waits). Not persisted.
	version uint64
	changed chan struct{}
}

// newJobTracker returns the tracker of a job whose record is rec, which it
// owns from then on.
func newJobTracker(p *parts, rec *Record) *jobTracker {
	return &jobTracker{id: rec.ID, parts: p, rec: rec}
}

// update changes the job's record under its lock and persists it after.
// When fn returns an error nothing changes and nothing is written.
func (j *jobTracker) update(fn func(r *Record) error) error {
	return j.apply(func(cur *jobTracker) error { return fn(cur.rec) })
}

// apply is update for a change that touches the tracker's own state too
// (lastContact): fn is given the tracker the change is made on, with its
// mu held, which is not j when j left memory while the caller held it.
func (j *jobTracker) apply(fn func(cur *jobTracker) error) error {
	j.save.Lock()
	j.mu.Lock()
	if j.evicted {
		// Left memory while the caller held it: the change goes to the
		// job as it is now.
		j.mu.Unlock()
		j.save.Unlock()
		cur := j.reload(j.id)
		if cur == nil {
			return fmt.Errorf("job %s: %w", j.id, ErrNotFound)
		}
		return cur.apply(fn)
	}
	defer j.save.Unlock()
	if err := fn(j); err != nil {
		j.mu.Unlock()
		return err
	}
	j.bump()
	if j.rec.terminal() {
		// The signed declaration is re-announced only while the job is
		// queued; an ended job does not carry it.
		j.rec.Envelope = nil
		if j.endedAt.IsZero() {
			j.endedAt = time.Now()
		}
	}
	snap := j.rec.copy()
	j.mu.Unlock()
	err := j.write(&snap)
	j.mu.Lock()
	j.dirty = err != nil
	j.mu.Unlock()
	return err
}

// change is update for a change the job goes on with whether or not it
// reaches the disk: a failed write is logged and counted (write), the
// record in memory stays this run's truth, and the next change writes it
// again whole.
func (j *jobTracker) change(fn func(r *Record) error) {
	j.update(fn) //nolint:errcheck // logged and counted by write, or nothing to change
}

// write persists a snapshot of the job's record. The caller holds save,
// or the job is not in the registry yet.
func (j *jobTracker) write(r *Record) error {
	if err := j.d.Records.Put(state.PrefixJob, r.ID, r); err != nil {
		j.d.Metrics.PersistErrors.Inc()
		j.log.Error("persist job", "job", r.ID, "err", err)
		return fmt.Errorf("persist job %s: %w", r.ID, err)
	}
	return nil
}

// bump counts a change of the job's record and wakes those waiting for
// one. The caller holds j.mu.
func (j *jobTracker) bump() {
	j.version++
	if a, i, ok := taskKey(j.rec); ok {
		j.tallies.note(a, i)
	}
	if j.changed != nil {
		close(j.changed)
		j.changed = nil
	}
}

// view calls fn with the job's record under its lock: fn reads, and
// neither blocks nor takes another lock.
func (j *jobTracker) view(fn func(r *Record)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fn(j.rec)
}

// snapshot returns a copy of the job's record.
func (j *jobTracker) snapshot() Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rec.copy()
}

// state is the job's state.
func (j *jobTracker) state() api.JobState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rec.State
}

// api renders the job for the API, with its version.
func (j *jobTracker) api() api.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.apiLocked()
}

// apiLocked is api for a caller that holds j.mu.
func (j *jobTracker) apiLocked() api.Job {
	out := j.rec.API()
	out.Version = j.versionBase + j.version
	out.Path, out.PathVia = j.dataPath()
	out.StagingRate = j.stagingRate()
	return out
}

// stagingRate is, while the job's provider stages its inputs from here,
// how fast they move (api.Job.StagingRate). The caller holds j.mu.
func (j *jobTracker) stagingRate() float64 {
	r := j.rec
	if r.Lease == nil || r.State != api.JobRenting {
		return 0
	}
	p, err := peer.Decode(r.Lease.Terms.Provider)
	if err != nil {
		return 0
	}
	return j.served.rate(p, time.Now())
}

// dataPath is, while the job's lease lives, how this node reaches its
// provider (api.Job.Path), and the relay when through one that carries
// data. The caller holds j.mu.
func (j *jobTracker) dataPath() (path, via string) {
	r := j.rec
	if r.Lease == nil || r.terminal() || j.d.Path == nil {
		return "", ""
	}
	p, err := peer.Decode(r.Lease.Terms.Provider)
	if err != nil || p == j.d.Self {
		return "", ""
	}
	got, why := j.d.Path(p)
	if got == p2p.PathRelayedData {
		via = why // the relay
	}
	return got.String(), via
}

// next returns the job, rendered for the API, when it is at another
// version than seen, has ended or left memory, or when done; else a channel
// closed at its next change (or when it leaves memory), to wait on before
// asking again.
func (j *jobTracker) next(seen uint64, done bool) (api.Job, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.versionBase+j.version != seen || j.rec.terminal() || done || j.evicted {
		return j.apiLocked(), nil
	}
	if j.changed == nil {
		j.changed = make(chan struct{})
	}
	return api.Job{}, j.changed
}

// checkLease checks that the job is under this lease from this provider.
func (j *jobTracker) checkLease(lease string, provider peer.ID) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return leased(j.rec, lease, provider)
}

// leased checks that r is under this lease from this provider.
func leased(r *Record, lease string, provider peer.ID) error {
	if r.Lease == nil || r.Lease.Terms.ID != lease || r.Lease.Terms.Provider != provider.String() {
		return p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("job %s is not leased as %s from %s", r.ID, lease, provider))
	}
	return nil
}
