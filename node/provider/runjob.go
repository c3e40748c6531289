package provider

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
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
	lr.receipts.ask()
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
		Limit:       runLimit(t, now),
		Grace:       lr.cfg.Grace,
		GPUs:        lr.gpus,
		Image:       st.img,
		Disk:        disk,
		Secrets:     lr.runSecrets(),
	}
	if st.net != nil {
		spec.NetNS, spec.Sysfs = st.net.NetNSPath(), st.net.SysfsPath()
		env := make(map[string]string, len(spec.Env)+len(st.env))
		maps.Copy(env, spec.Env)
		maps.Copy(env, st.env)
		spec.Env = env
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
	res, err := runSandbox(ctx, lr.d, spec)
	stopCkpt()
	<-ckptDone
	if spec.Checkpoint != nil {
		// Every process of the job has gone: the folder is as it left it.
		_ = lr.takeCheckpoint(lr.hard, spec.Checkpoint.Source, captureFinal)
	}
	if err != nil {
		lr.log.Warn("run could not start", "lease", t.ID, "err", err)
	}
	lr.end(runEnding(ctx, spec, res, err))
	lr.log.Info("run ended", "lease", t.ID, "outcome", res.Outcome, "exit", res.ExitCode, "reason", res.Reason)
	return res
}

// runEnding is how a lease ends after its run: res and err, Run's verdict,
// said in the ledger's terms. A run the sandbox did not end on its own
// (stopped, or never started) ends as ctx's cause says: withdrawn by the
// submitter, released unrun, stopped by a panic here, or by this provider
// stopping. It is the one place exec's vocabulary turns into the ledger's.
func runEnding(ctx context.Context, spec exec.Spec, res exec.Result, err error) ledger.Ending {
	if err != nil {
		return ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: err.Error()}
	}
	// The sandbox names the provider where the run failed on its side
	// (its runtime died); everything else a run ends in is the job's.
	by := ledger.AttributionJob
	if res.Attribution == exec.ByProvider {
		by = ledger.AttributionProvider
	}
	e := ledger.Ending{Attribution: by, Reason: res.Reason, ExitCode: &res.ExitCode}
	switch {
	case res.Outcome == exec.Completed:
		e.Outcome, e.Reason = ledger.OutcomeCompleted, ""
	case res.Outcome == exec.Failed && res.DiskFull:
		e.Outcome, e.Reason = ledger.OutcomeFailed, "wrote more than request.disk "+market.Size(spec.Disk.Bytes).String()
	case res.Outcome == exec.Failed && res.Reason == exec.ReasonOOM:
		e.Outcome, e.Reason = ledger.OutcomeFailed, "out of memory: used all of request.memory "+market.Size(spec.MemoryBytes).String()
	case res.Outcome == exec.Failed:
		e.Outcome = ledger.OutcomeFailed
	case res.Outcome == exec.Limit:
		e.Outcome, e.Reason = ledger.OutcomeLimit, "limit "+spec.Limit.String()+" reached"
	case errors.Is(context.Cause(ctx), ErrReceiptsRefused):
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "stopped while running: "+ErrReceiptsRefused.Error()
	case errors.Is(context.Cause(ctx), ErrWithdrawn):
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "withdrawn while running"
	case errors.Is(context.Cause(ctx), ErrReleasedUnrun):
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomeProviderLost, ledger.AttributionProvider, ErrReleasedUnrun.Error()
	case errors.Is(context.Cause(ctx), ErrPreempted):
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomePreempted, ledger.AttributionProvider, context.Cause(ctx).Error()
	case ctxInternal(ctx):
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomeFailed, ledger.AttributionProvider, errInternal.Error()
	default:
		e.Outcome, e.Attribution, e.Reason = ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider stopped the run"
	}
	return e
}

// gpuModel is the model of a lease's GPUs, as receipts name it.
func gpuModel(gpus []exec.GPU) string {
	if len(gpus) > 0 {
		return gpus[0].Model
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

// runLimit is how long a run starting at now may go: what is left of the
// job's limit, which counts from the proposal, so that staging is inside it
// and the lease ends within the held time its terms allow
// (ledger.HeldWindow). A run whose staging took the whole limit still
// starts, for a moment, and ends at its limit as any other.
func runLimit(t wire.LeaseTerms, now time.Time) time.Duration {
	limit := time.Duration(t.Limit) * time.Millisecond
	if t.Bound != ledger.BoundRule {
		return limit // terms from before the rule: the limit counts from the run
	}
	return max(time.UnixMilli(t.Proposed).Add(limit).Sub(now), time.Second)
}
