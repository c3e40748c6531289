package provider

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// runJob runs the job in its sandbox, taking checkpoints as it goes, and
// records how it ended. Its output and checkpoint go in st.work, on
// st.disk if that is set.
func (lr *leaseRunner) runJob(ctx context.Context, st *staged) exec.Result {
	work, disk := st.work, st.disk
	rec := lr.snapshot()
	t := rec.Lease.Terms
	decl := rec.Declaration
	now := time.Now()
	lr.change(func(r *Record) { r.State, r.RunStart = Running, now })
	// The first receipt both sign comes as the run starts: from here on no
	// more than one receipt interval rests on one side's word. It also
	// tells the submitter that the run started (ReceiptRequest.Steps).
	select {
	case lr.receiptNow <- struct{}{}:
	default:
	}
	seen := lr.seeGPUs(ctx)
	lr.change(func(r *Record) { r.GPUsSeen = seen })
	spec := exec.Spec{
		ID:          t.ID,
		Dir:         filepath.Join(lr.dir(), "run"),
		Command:     decl.Work.Command,
		Env:         decl.Work.Env,
		WorkDir:     decl.Work.Workdir,
		Inputs:      st.inputs,
		Output:      exec.Mount{Source: filepath.Join(work, "out"), Target: decl.Output.Path},
		CPUs:        t.CPUs,
		MemoryBytes: t.MemoryBytes,
		Limit:       time.Duration(t.Limit) * time.Millisecond,
		Grace:       lr.cfg.Grace,
		GPUs:        lr.leasedGPUs(),
		Image:       st.img,
		Disk:        disk,
	}
	ckptDone := make(chan struct{})
	cctx, stopCkpt := context.WithCancel(lr.hard)
	if cp := decl.Output.Checkpoints; cp != nil {
		spec.Checkpoint = &exec.Mount{Source: filepath.Join(work, "ckpt"), Target: cp.Path}
		go func() {
			defer close(ckptDone)
			lr.guarded("checkpoints", func() {
				lr.checkpointLoop(cctx, spec.Checkpoint.Source, time.Duration(cp.Every)*time.Millisecond)
			})
		}()
	} else {
		close(ckptDone)
	}
	res, err := lr.d.Runner.Run(ctx, spec)
	stopCkpt()
	<-ckptDone
	if spec.Checkpoint != nil {
		// Every process of the job has gone: the folder is as it left it.
		_ = lr.takeCheckpoint(lr.hard, spec.Checkpoint.Source, captureFinal)
	}
	var outcome, attribution, reason string
	exit := &res.ExitCode
	switch {
	case err != nil:
		lr.log.Warn("run could not start", "lease", t.ID, "err", err)
		outcome, attribution, reason, exit = ledger.OutcomeFailed, ledger.AttributionProvider, err.Error(), nil
	case res.Outcome == exec.Completed:
		outcome, attribution = ledger.OutcomeCompleted, ledger.AttributionJob
	case res.Outcome == exec.Failed && res.DiskFull:
		outcome, attribution, reason = ledger.OutcomeFailed, ledger.AttributionJob, "wrote more than request.disk "+market.Size(disk.Bytes).String()
	case res.Outcome == exec.Failed && res.Reason == exec.ReasonOOM:
		outcome, attribution, reason = ledger.OutcomeFailed, ledger.AttributionJob, "out of memory: used all of request.memory "+market.Size(t.MemoryBytes).String()
	case res.Outcome == exec.Failed:
		outcome, attribution, reason = ledger.OutcomeFailed, ledger.AttributionJob, res.Reason
	case res.Outcome == exec.Limit:
		outcome, attribution, reason = ledger.OutcomeLimit, ledger.AttributionJob, "limit "+spec.Limit.String()+" reached"
	case errors.Is(context.Cause(ctx), ErrWithdrawn):
		outcome, attribution, reason = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "withdrawn while running"
	case errors.Is(context.Cause(ctx), ErrReleasedUnrun):
		outcome, attribution, reason = ledger.OutcomeProviderLost, ledger.AttributionProvider, ErrReleasedUnrun.Error()
	case ctxInternal(ctx):
		outcome, attribution, reason = ledger.OutcomeFailed, ledger.AttributionProvider, errInternal.Error()
	default:
		outcome, attribution, reason = ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider stopped the run"
	}
	lr.change(func(r *Record) { r.end(outcome, attribution, reason, exit) })
	lr.log.Info("run ended", "lease", t.ID, "outcome", res.Outcome, "exit", res.ExitCode, "reason", res.Reason)
	return res
}

// leasedGPUs are this node's GPUs that the lease holds.
func (lr *leaseRunner) leasedGPUs() []exec.GPU {
	return gpusByUUID(lr.d.GPUs, lr.snapshot().Lease.Terms.GPUs)
}

// gpuModel is the model of the leased GPUs, as receipts name it.
func (lr *leaseRunner) gpuModel() string {
	if gs := lr.leasedGPUs(); len(gs) > 0 {
		return gs[0].Model
	}
	return ""
}

// seeGPUs is the provider's own check before a run: the leased GPUs as
// the driver reports them now. One it no longer reports is left out, for
// the submitter to see in the final receipt.
func (lr *leaseRunner) seeGPUs(ctx context.Context) []ledger.GPUSeen {
	gpus := lr.d.GPUs
	if lr.d.SeeGPUs != nil {
		gpus = lr.d.SeeGPUs(ctx)
	}
	var out []ledger.GPUSeen
	for _, u := range lr.snapshot().Lease.Terms.GPUs {
		for _, g := range gpus {
			if g.UUID == u {
				out = append(out, ledger.GPUSeen{UUID: g.UUID, Model: g.Model})
			}
		}
	}
	return out
}

// gpusByUUID returns the GPUs of all with these UUIDs.
func gpusByUUID(all []exec.GPU, uuids []string) []exec.GPU {
	var out []exec.GPU
	for _, u := range uuids {
		for _, g := range all {
			if g.UUID == u {
				out = append(out, g)
			}
		}
	}
	return out
}
