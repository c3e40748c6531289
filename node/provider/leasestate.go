package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
)

// leaseState is one lease's state on its provider: its record, persisted
// under state.PrefixLease, the job's secrets and the func that stops its
// work. The lease's runner holds it (leaseRunner embeds it), and its
// receipts and gang share it; each reads a copy of the record (snapshot)
// and changes it through update or change, which persist it.
//
// Locks, in the order they are taken: save, then mu. mu guards memory;
// save is an ordering lock, held across the record's write on purpose,
// and never taken under mu.
type leaseState struct {
	env *env // immutable, shared with the role

	// save orders the writes of rec: a snapshot taken later is never
	// overwritten by one taken earlier. An ordering lock: it spans
	// Records.Put (update). It is taken before mu.
	save sync.Mutex
	// mu guards the fields below; a state lock, never held across I/O.
	mu  sync.Mutex
	rec *Record
	// secrets are the values of the job's secrets, in memory alone
	// (secrets.go); set before the runner is registered, dropped at
	// release.
	secrets wire.SecretValues
	// cancel stops the lease's work with a cause (ErrWithdrawn, or the
	// provider stopping); nil until the runner is armed.
	cancel context.CancelCauseFunc
}

// snapshot copies a lease's record.
func (s *leaseState) snapshot() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.rec
}

// update changes a lease's record under its lock, then persists it outside
// the lock. Readers of the record never wait on the disk.
func (s *leaseState) update(fn func(r *Record)) error {
	s.save.Lock()
	defer s.save.Unlock()
	s.mu.Lock()
	fn(s.rec)
	snap := *s.rec
	s.mu.Unlock()
	return s.write(&snap)
}

// change is update for a change the lease goes on with whether or not it
// reaches the disk: a failed write is logged and counted (write), the
// record in memory stays this run's truth, and the next change writes it
// again whole.
func (s *leaseState) change(fn func(r *Record)) {
	s.update(fn) //nolint:errcheck // logged and counted by write
}

// end records how the lease ended, unless that is on record already
// (Record.end).
func (s *leaseState) end(e ledger.Ending) {
	s.change(func(r *Record) { r.end(e) })
}

// write persists r, the caller's copy of the record.
func (s *leaseState) write(r *Record) error {
	if err := s.env.d.Records.Put(state.PrefixLease, r.ID(), r); err != nil {
		s.env.d.Metrics.PersistErrors.Inc()
		s.env.log.Error("persist lease", "lease", r.ID(), "err", err)
		return fmt.Errorf("persist lease %s: %w", r.ID(), err)
	}
	return nil
}

// arm sets the func that stops the lease's work, and returns its terms.
func (s *leaseState) arm(cancel context.CancelCauseFunc) wire.LeaseTerms {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
	return s.rec.Lease.Terms
}

// stopper returns the lease's terms and the func that stops its work: nil
// until the runner is armed.
func (s *leaseState) stopper() (wire.LeaseTerms, context.CancelCauseFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Lease.Terms, s.cancel
}

// dir is the lease's folder, under DataDir/leases.
func (s *leaseState) dir() string {
	return filepath.Join(s.env.cfg.DataDir, "leases", s.snapshot().ID())
}
