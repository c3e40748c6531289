package provider

import (
	"context"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A leaseRunner carries one signed lease through its life, as nomad's task
// runner carries a task, one phase a file: staging (stage.go), the run and
// its checkpoints (runjob.go, checkpoint.go), a gang part's wait for its
// gang (gang.go), the output (output.go), release (release.go) and
// settlement (settle.go). It holds the lease's state (leaseState:
// the record, its locks and its persistence) and its receipts (receipts);
// the role (Provider) keeps which GPUs are held and the registry of
// runners, and hears from a runner only that its lease is released
// (onRelease) and settled (onSettled).
//
// A runner is made by Provider.newRunner, registered in the role's
// registry, started by Provider.start on the role's task group, and
// awaited by Shutdown's wait on that group. A runner that Recover made for
// a lease a previous run left is not started: Resume releases and settles
// it.
//
// Locks, in the order they are taken: the receipts' ordering lock, then
// the lease state's save, then its mu (leaseState). Only mu guards
// memory, and none is held across a call into the role.
type leaseRunner struct {
	*env // immutable, shared with the role
	// leaseState is the lease's record, secrets and stop func, with its
	// locks (leasestate.go).
	leaseState
	// src and inputs are the role's sourcing and layouts, which staging
	// and cleanup use; each has a lock of its own. Immutable.
	src    *sourcing
	inputs *layouts
	// onRelease gives the lease's GPUs back to the role and drops the
	// runner from its registry (Provider.released); onSettled tells the
	// role the lease is settled (registry.settledLease). Each takes a
	// lock of the role's, never while a lock of the runner is held.
	// Immutable.
	onRelease func(wire.LeaseTerms)
	onSettled func(lease string)
	// submitter is the lease's submitter: the peer the terms name, as
	// the caller of newRunner checked it. gpus are this node's GPUs the
	// lease holds. Immutable.
	submitter peer.ID
	gpus      []exec.GPU

	// receipts are the lease's receipts (receipts.go), with their own
	// ordering lock. Immutable pointer.
	receipts *receipts
	// gangStart brings a gang part its gang lease, signed by every
	// party, which starts its run (gang.go).
	gangStart chan wire.SignedGangLease
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
		lr.guarded("receipts", func() { lr.receipts.interim(rctx) })
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
	if staged && join.join(ctx, &st) && lr.probe(ctx) {
		res, ran = lr.runJob(ctx, &st), true
	}
	lr.output(res, st.work, ran)
}
