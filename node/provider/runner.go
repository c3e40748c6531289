package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A leaseRunner carries one signed lease through its life, as nomad's task
// runner carries a task: staging (stage.go), the run and its checkpoints
// (runjob.go, checkpoint.go), the output (output.go), release (release.go)
// and the receipts and settlement (settle.go). It owns the lease's record,
// the locks around it and its persistence; the role (Provider) keeps which
// GPUs are held and the registry of runners, and hears from a runner only
// that its lease is released (onRelease).
//
// A runner is made by Provider.newRunner, registered in Provider.leases,
// started by Provider.start on the role's task group, and awaited by
// Shutdown's wait on that group. A runner that Recover made for a lease a
// previous run left is not started: Resume releases and settles it.
//
// Locks, in the order they are taken: receipts, then save, then mu. Only mu
// guards memory; receipts and save are ordering locks, held across I/O on
// purpose, and never taken under mu.
type leaseRunner struct {
	*env // immutable, shared with the role
	// src and inputs are the role's sourcing and layouts, which staging
	// and cleanup use; each has a lock of its own.
	src    *sourcing
	inputs *layouts
	// onRelease gives the lease's GPUs back to the role and drops the
	// runner from its registry (Provider.released); onSettled tells the
	// role the lease is settled (Provider.settledLease). Each takes the
	// role's lock, never while a lock of the runner is held.
	onRelease func(wire.LeaseTerms)
	onSettled func(lease string)
	// submitter is the lease's submitter: the peer the terms name, as
	// the caller of newRunner checked it.
	submitter peer.ID

	// receipts serialises receipt exchanges (each links to the last). An
	// ordering lock: it is held while the submitter answers (Calls.Call)
	// and while the ledger stores the receipt (Ledger.Append,
	// AppendOneSided, RecordDispute). It is taken before save and mu.
	receipts sync.Mutex
	// save orders the writes of rec: a snapshot taken later is never
	// overwritten by one taken earlier. An ordering lock: it spans
	// Records.Put (update). It is taken before mu.
	save sync.Mutex
	mu   sync.Mutex // guards rec, cancel and secrets; a state lock, never held across I/O
	rec  *Record
	// secrets are the values of the job's secrets, in memory alone
	// (secrets.go); set before the runner is registered, dropped at
	// release.
	secrets wire.SecretValues
	// cancel stops the lease's work with a cause (ErrWithdrawn, or the
	// provider stopping).
	cancel context.CancelCauseFunc
	// receiptNow asks for an interim receipt at once (the run started).
	receiptNow chan struct{}
	// gangStart brings a gang part its gang lease, signed by every
	// party, which starts its run (gang.go).
	gangStart chan wire.SignedGangLease
}

// newRunner makes the runner of a lease this node provides, wired to this
// role. sub is the submitter the lease's terms name, which the caller has
// decoded (or named the terms after). The caller registers the runner in
// p.leases (registry.add).
func (p *Provider) newRunner(rec *Record, sub peer.ID) *leaseRunner {
	return &leaseRunner{
		env: p.env, src: &p.src, inputs: &p.inputs, onRelease: p.released, onSettled: p.leases.settledLease,
		submitter: sub, rec: rec, receiptNow: make(chan struct{}, 1), gangStart: make(chan wire.SignedGangLease, 1),
	}
}

// arm sets the func that stops the lease's work, and returns its terms.
func (lr *leaseRunner) arm(cancel context.CancelCauseFunc) wire.LeaseTerms {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.cancel = cancel
	return lr.rec.Lease.Terms
}

// stopper returns the lease's terms and the func that stops its work: nil
// until the runner is armed.
func (lr *leaseRunner) stopper() (wire.LeaseTerms, context.CancelCauseFunc) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.rec.Lease.Terms, lr.cancel
}

// start runs the lease's steps in the background, on the role's task
// group: Shutdown awaits the runner there. ctx is the lease's, ended by
// cancel with a cause.
func (lr *leaseRunner) start(ctx context.Context, cancel context.CancelCauseFunc) {
	if !lr.tasks.Go(func() {
		defer cancel(nil)
		lr.run(ctx)
	}) {
		cancel(nil)
	}
}

// run carries a lease through staging, run and output to release. Every
// way out ends in release, a panic of its own included (handling.go):
// nothing leaves compute held. ctx ends with the run (a withdrawal, or the
// provider stopping); what follows the run uses lr.hard, so that shutdown
// waits for it only as long as it is willing to.
func (lr *leaseRunner) run(ctx context.Context) {
	rctx, stopReceipts := context.WithCancel(lr.hard)
	receiptsDone := make(chan struct{})
	go func() {
		defer close(receiptsDone)
		lr.guarded("receipts", func() { lr.interimReceipts(rctx) })
	}()
	var st staged
	jctx, stopJoin := context.WithCancel(ctx)
	join := lr.openGang(jctx)
	defer func() {
		if v := recover(); v != nil {
			lr.recovered("lease", v)
		}
		// Release.
		stopReceipts()
		<-receiptsDone
		stopJoin()
		if join != nil {
			<-join.done
			if join.net != nil {
				if err := join.net.Close(); err != nil {
					lr.log.Warn("close the gang's network", "lease", lr.snapshot().ID(), "err", err)
				}
			}
		}
		lr.release(time.Now())
		lr.cleanup(lr.hard)
		lr.releaseImage(st.releaseImage)
		lr.settle()
	}()

	var res exec.Result
	ran := false
	staged := lr.stage(ctx, &st)
	lr.disk.staged(lr.snapshot().ID())
	if staged && lr.joinGang(ctx, join, &st) {
		res, ran = lr.runJob(ctx, &st), true
	}
	lr.output(res, st.work, ran)
}

// dir is the lease's folder, under DataDir/leases.
func (lr *leaseRunner) dir() string {
	return filepath.Join(lr.cfg.DataDir, "leases", lr.snapshot().ID())
}

// snapshot copies a lease's record.
func (lr *leaseRunner) snapshot() Record {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return *lr.rec
}

// update changes a lease's record under its lock, then persists it outside
// the lock. Readers of the record never wait on the disk.
func (lr *leaseRunner) update(fn func(r *Record)) error {
	lr.save.Lock()
	defer lr.save.Unlock()
	lr.mu.Lock()
	fn(lr.rec)
	snap := *lr.rec
	lr.mu.Unlock()
	return lr.write(&snap)
}

// change is update for a change the lease goes on with whether or not it
// reaches the disk: a failed write is logged and counted (write), the
// record in memory stays this run's truth, and the next change writes it
// again whole.
func (lr *leaseRunner) change(fn func(r *Record)) {
	lr.update(fn) //nolint:errcheck // logged and counted by write
}

// end records how the lease ended, unless that is on record already
// (Record.end).
func (lr *leaseRunner) end(e ledger.Ending) {
	lr.change(func(r *Record) { r.end(e) })
}

func (lr *leaseRunner) write(r *Record) error {
	if err := lr.d.Records.Put(state.PrefixLease, r.ID(), r); err != nil {
		lr.d.Metrics.PersistErrors.Inc()
		lr.log.Error("persist lease", "lease", r.ID(), "err", err)
		return fmt.Errorf("persist lease %s: %w", r.ID(), err)
	}
	return nil
}
