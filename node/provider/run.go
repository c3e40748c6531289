package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Pin reasons of the content a provider keeps for a lease.
func pinInput(lease string) string  { return "input of lease " + lease }
func pinOutput(lease string) string { return "output of lease " + lease }
func pinImage(lease string) string  { return "image of lease " + lease }
func pinCheckpoint(lease string, n int) string {
	return fmt.Sprintf("checkpoint %d of lease %s", n, lease)
}

// run carries a lease through staging, run and output to release. Every
// way out ends in release, a panic of its own included (handling.go):
// nothing leaves compute held. ctx ends with the run (a withdrawal, or the
// provider stopping); what follows the run uses p.hard, so that shutdown
// waits for it only as long as it is willing to.
func (p *Provider) run(ctx context.Context, l *lease) {
	rec := l.snapshot()
	t := rec.Lease.Terms
	decl := rec.Declaration
	submitter, _ := peer.Decode(t.Submitter)
	dir := p.leaseDir(t.ID)
	log := p.log.With("lease", t.ID, "job", t.Job)
	end := func(outcome, attribution, reason string, exit *int) {
		p.change(l, func(r *Record) { r.end(outcome, attribution, reason, exit) })
	}

	rctx, stopReceipts := context.WithCancel(p.hard)
	receiptsDone := make(chan struct{})
	go func() {
		defer close(receiptsDone)
		p.guarded(l, "receipts", func() { p.interimReceipts(rctx, l, submitter) })
	}()
	releaseImage := func() {}
	defer func() {
		if v := recover(); v != nil {
			p.recovered(l, "lease", v)
		}
		// Release.
		stopReceipts()
		<-receiptsDone
		p.release(l, time.Now())
		p.cleanup(p.hard, t.ID)
		// The layers go back once the sandbox's overlay is gone; they
		// stay unpacked in the cache for the next job, so the image's own
		// pin can go.
		releaseImage()
		if c, err := cid.Decode(decl.Work.Image); err == nil {
			if err := p.d.Store.Unpin(p.hard, c, pinImage(t.ID)); err != nil && !errors.Is(err, content.ErrNotFound) {
				log.Warn("unpin image", "err", err)
			}
		}
		p.settle(l, submitter)
	}()

	// Staging: fetch every input completely, then lay it out for the mounts.
	p.change(l, func(r *Record) { r.State = Staging })
	// The job's disk first: a resumed run's checkpoint is laid out on it.
	work, disk, diskErr := p.makeDisk(ctx, dir, decl.Request.DiskBytes())
	var inputs []exec.Mount
	stagingErr := diskErr
	if diskErr == nil {
		inputs, stagingErr = p.stage(ctx, l, t.Job, t.ID, submitter, decl.Data, dir)
	}
	var img *exec.ImageRoot
	if stagingErr == nil && decl.Work.Image != "" {
		var rel func()
		if img, rel, stagingErr = p.stageImage(ctx, l, t.ID, submitter, decl.Work, log); stagingErr == nil {
			releaseImage = rel
		}
	}
	if cp := decl.Output.Checkpoints; stagingErr == nil && cp != nil && cp.From != "" {
		stagingErr = p.stageCheckpoint(ctx, l, t.ID, submitter, cp.From, filepath.Join(work, "ckpt"))
	}

	var res exec.Result
	ran := false
	if diskErr != nil && ctx.Err() == nil {
		log.Warn("no disk for the job", "err", diskErr)
		end(ledger.OutcomeFailed, ledger.AttributionProvider, diskErr.Error(), nil)
	} else if stagingErr != nil {
		switch {
		case errors.Is(context.Cause(ctx), ErrWithdrawn):
			end(ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "withdrawn during staging", nil)
		case errors.Is(context.Cause(ctx), ErrReleasedUnrun):
			end(ledger.OutcomeProviderLost, ledger.AttributionProvider, ErrReleasedUnrun.Error(), nil)
		case ctx.Err() != nil:
			end(ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider stopped during staging", nil)
		case refusedContent(stagingErr):
			// Not this node's fault, and no other provider would take it:
			// the job fails here, once.
			log.Warn("content of the job refused", "err", stagingErr)
			end(ledger.OutcomeFailed, ledger.AttributionJob, "refused "+stagingErr.Error(), nil)
		default:
			log.Warn("staging failed", "err", stagingErr)
			end(ledger.OutcomeFailed, ledger.AttributionNetwork, "staging: "+stagingErr.Error(), nil)
		}
	} else {
		res, ran = p.runJob(ctx, l, submitter, inputs, img, dir, work, disk), true
	}

	// Output: the declared output path plus the logs, as one DAG. The
	// output request, or else the final receipt, tells the submitter of
	// the step; an import that takes a while is told of on its own, so the
	// submitter's status does not lag behind it.
	now := time.Now()
	p.change(l, func(r *Record) { r.State, r.OutputStart = Output, now })
	if ran {
		slowImport := time.AfterFunc(outputEventAfter, func() {
			p.sendEvent(submitter, wire.EventRequest{Lease: t.ID, Job: t.Job, Step: api.StepOutput, At: now.UnixMilli()})
		})
		err := p.handle(l, "importing the output", func() error {
			return p.importOutput(p.hard, l, submitter, work, res, decl.Request.DiskBytes())
		})
		slowImport.Stop()
		if err != nil {
			log.Warn("output not imported", "err", err)
			p.change(l, func(r *Record) {
				if r.Outcome != ledger.OutcomeCompleted {
					return
				}
				if refusedContent(err) {
					// The job left what no output may hold.
					r.Outcome, r.Attribution, r.Reason = ledger.OutcomeFailed, ledger.AttributionJob, clipReason(err.Error())
				} else {
					r.Outcome, r.Attribution, r.Reason = ledger.OutcomeOutputLost, ledger.AttributionProvider, clipReason(err.Error())
				}
			})
		} else if err := p.deliverOutput(p.ctx, l, submitter, p.cfg.OutputTimeout); err != nil {
			// The submitter is away: the GPUs go back now and the output
			// waits, pinned, for it to return (see settle).
			log.Info("output waits for the submitter", "err", err)
		}
	}
}

// stage fetches every input of a lease and lays it out under dir.
func (p *Provider) stage(ctx context.Context, l *lease, job, lease string, from peer.ID, data []market.Input, dir string) ([]exec.Mount, error) {
	var inputs []exec.Mount
	for i, in := range data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return nil, fmt.Errorf("data[%d].source: %w", i, err)
		}
		if _, err := p.fetchStaged(ctx, job, lease, from, c, content.FetchOptions{Pin: pinInput(lease), MaxBytes: p.cfg.Limits.MaxBytes, Progress: p.d.Metrics.Staged}); err != nil {
			return nil, fmt.Errorf("data[%d] (%s): fetch: %w", i, c, err)
		}
		var dst string
		err = p.handle(l, fmt.Sprintf("laying out data[%d] (%s)", i, c), func() (err error) {
			dst, err = p.layOut(ctx, c, lease)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("data[%d] (%s): lay out: %w", i, c, err)
		}
		inputs = append(inputs, exec.Mount{Source: dst, Target: in.Mount})
	}
	return inputs, nil
}

// fetch fetches a DAG from the submitter for staging, over a direct
// connection: a relay carries a lease's messages but, by design, not its
// data. With only a relayed path it waits for a hole to be punched, then
// fails naming why, rather than stalling.
func (p *Provider) fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	if p.d.Path != nil {
		if err := p2p.AwaitDirect(ctx, p.d.Path, from, "the submitter", p2p.DirectWait); err != nil {
			return content.FetchStats{}, err
		}
	}
	return p.d.Fetcher.Fetch(ctx, from, root, o)
}

// stageCheckpoint lays out the checkpoint a resumed run starts from in the
// folder mounted, writable, at the job's checkpoint path: the job finds it
// where it left it. Exported straight there, it costs one copy, the same as
// an input; the sandbox hands the folder to the job's user.
func (p *Provider) stageCheckpoint(ctx context.Context, l *lease, lease string, from peer.ID, src, dst string) error {
	c, err := cid.Decode(src)
	if err != nil {
		return fmt.Errorf("output.checkpoints.from: %w", err)
	}
	if _, err := p.fetch(ctx, from, c, content.FetchOptions{Pin: pinInput(lease), MaxBytes: p.cfg.Limits.MaxBytes, Progress: p.d.Metrics.Staged}); err != nil {
		return fmt.Errorf("the checkpoint to resume from (%s): fetch: %w", c, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	err = p.handle(l, fmt.Sprintf("laying out the checkpoint to resume from (%s)", c), func() error {
		return p.d.Store.Export(ctx, c, dst, content.ExportOptions{Limits: p.cfg.Limits})
	})
	if err != nil {
		return fmt.Errorf("the checkpoint to resume from (%s): lay out: %w", c, err)
	}
	return nil
}

// stageImage brings the job's image into the store, from its registry when
// this node pulls and the declaration names one, else from the submitter,
// and acquires its unpacked layers. A pulled image must have the CID the
// submitter signed: the registry could serve other bytes under the digest
// only by breaking sha256, but a different platform or a damaged DAG would
// show here.
func (p *Provider) stageImage(ctx context.Context, l *lease, lease string, from peer.ID, w market.Work, log *slog.Logger) (*exec.ImageRoot, func(), error) {
	if p.d.Images == nil {
		return nil, nil, errors.New("this provider cannot run images")
	}
	root, err := cid.Decode(w.Image)
	if err != nil {
		return nil, nil, fmt.Errorf("work.image: %w", err)
	}
	if p.cfg.ImagePull && w.ImageRef != "" {
		got, err := p.d.Images.Pull(ctx, w.ImageRef, pinImage(lease))
		if err != nil {
			return nil, nil, fmt.Errorf("pull image %s: %w", w.ImageRef, err)
		}
		if got != root {
			return nil, nil, fmt.Errorf("image %s pulled as %s, but the job names %s", w.ImageRef, got, root)
		}
		log.Info("image pulled", "ref", w.ImageRef, "cid", root)
	} else if _, err := p.fetch(ctx, from, root, content.FetchOptions{Pin: pinImage(lease), Progress: p.d.Metrics.Staged}); err != nil {
		return nil, nil, fmt.Errorf("fetch image %s: %w", root, err)
	}
	var img *exec.ImageRoot
	var release func()
	err = p.handle(l, fmt.Sprintf("unpacking the image (%s)", root), func() (err error) {
		img, release, err = p.d.Images.Prepare(ctx, root)
		return err
	})
	if err != nil {
		return nil, nil, err // Prepare names the image, and the layer
	}
	return img, release, nil
}

// makeDisk makes the filesystem that bounds what the job writes, and
// returns the folder its output and checkpoint go in: the disk, or dir
// itself where this node has no disks.
func (p *Provider) makeDisk(ctx context.Context, dir string, bytes uint64) (string, *exec.Disk, error) {
	if p.d.Disks == nil {
		return dir, nil, nil
	}
	d, err := p.d.Disks.Mount(ctx, dir, bytes)
	if err != nil {
		return dir, nil, err
	}
	return d.Path, &d, nil
}

// runJob runs the job in its sandbox, taking checkpoints as it goes, and
// records how it ended. Its output and checkpoint go in work, on disk if
// that is set.
func (p *Provider) runJob(ctx context.Context, l *lease, submitter peer.ID, inputs []exec.Mount, img *exec.ImageRoot, dir, work string, disk *exec.Disk) exec.Result {
	rec := l.snapshot()
	t := rec.Lease.Terms
	decl := rec.Declaration
	now := time.Now()
	p.change(l, func(r *Record) { r.State, r.RunStart = Running, now })
	// The first receipt both sign comes as the run starts: from here on no
	// more than one receipt interval rests on one side's word. It also
	// tells the submitter that the run started (ReceiptRequest.Steps).
	select {
	case l.receiptNow <- struct{}{}:
	default:
	}
	seen := p.seeGPUs(ctx, t.GPUs)
	p.change(l, func(r *Record) { r.GPUsSeen = seen })
	spec := exec.Spec{
		ID:          t.ID,
		Dir:         filepath.Join(dir, "run"),
		Command:     decl.Work.Command,
		Env:         decl.Work.Env,
		WorkDir:     decl.Work.Workdir,
		Inputs:      inputs,
		Output:      exec.Mount{Source: filepath.Join(work, "out"), Target: decl.Output.Path},
		CPUs:        t.CPUs,
		MemoryBytes: t.MemoryBytes,
		Limit:       time.Duration(t.Limit) * time.Millisecond,
		Grace:       p.cfg.Grace,
		GPUs:        p.gpusByUUID(t.GPUs),
		Image:       img,
		Disk:        disk,
	}
	ckptDone := make(chan struct{})
	cctx, stopCkpt := context.WithCancel(p.hard)
	if cp := decl.Output.Checkpoints; cp != nil {
		spec.Checkpoint = &exec.Mount{Source: filepath.Join(work, "ckpt"), Target: cp.Path}
		go func() {
			defer close(ckptDone)
			p.guarded(l, "checkpoints", func() {
				p.checkpointLoop(cctx, l, submitter, spec.Checkpoint.Source, time.Duration(cp.Every)*time.Millisecond)
			})
		}()
	} else {
		close(ckptDone)
	}
	res, err := p.d.Runner.Run(ctx, spec)
	stopCkpt()
	<-ckptDone
	if spec.Checkpoint != nil {
		// Every process of the job has gone: the folder is as it left it.
		_ = p.takeCheckpoint(p.hard, l, submitter, spec.Checkpoint.Source, captureFinal)
	}
	var outcome, attribution, reason string
	exit := &res.ExitCode
	switch {
	case err != nil:
		p.log.Warn("run could not start", "lease", t.ID, "err", err)
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
	p.change(l, func(r *Record) { r.end(outcome, attribution, reason, exit) })
	p.log.Info("run ended", "lease", t.ID, "outcome", res.Outcome, "exit", res.ExitCode, "reason", res.Reason)
	return res
}

// cleanup removes what a lease left on disk and in the runtime.
func (p *Provider) cleanup(ctx context.Context, id string) {
	p.doneWithLaidOut(id)
	dir := p.leaseDir(id)
	if p.d.Runner != nil {
		if err := p.d.Runner.Cleanup(ctx, id, filepath.Join(dir, "run")); err != nil {
			p.log.Warn("cleanup", "lease", id, "err", err)
		}
	}
	if p.d.Disks != nil {
		// Before the folder goes: never delete through a mount.
		if err := p.d.Disks.Remove(dir); err != nil {
			p.log.Warn("remove the job's disk", "lease", id, "err", err)
			return
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		p.log.Warn("remove lease dir", "lease", id, "err", err)
	}
}

// outputEventAfter is how long an output import may take before the
// output step is told to the submitter on its own rather than with the
// output request that follows the import.
const outputEventAfter = time.Second

// sendEvent tells the submitter of a step, in the background so that an
// absent submitter does not slow the lease; best effort, the receipts carry
// the phases anyway.
func (p *Provider) sendEvent(to peer.ID, ev wire.EventRequest) {
	p.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.EventTimeout)
		defer cancel()
		if err := p.d.Calls.Call(ctx, to, wire.ProtoEvent, ev, nil); err != nil {
			p.log.Debug("event not delivered", "lease", ev.Lease, "step", ev.Step, "err", err)
		}
	})
}

// checkpointLoop imports the checkpoint folder every interval while the job
// runs, and announces each new one to the submitter. A capture of a folder
// that was changing is tried again shortly (ckptfolder.go).
func (p *Provider) checkpointLoop(ctx context.Context, l *lease, submitter peer.ID, dir string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	mode, retrying, readInVain := captureSettled, false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if retrying {
				// A whole interval went by without the folder settling.
				mode = captureSteady
			}
		case <-retry.C:
		}
		err := p.takeCheckpoint(ctx, l, submitter, dir, mode)
		if errors.Is(err, errChangedWhileRead) {
			readInVain++
		}
		if errors.Is(err, errUnsettled) {
			retrying = true
			retry.Reset(retryAfter(readInVain, every))
			continue
		}
		retry.Stop()
		mode, retrying, readInVain = captureSettled, false, 0
	}
}

// takeCheckpoint imports dir if it holds something new, pins it and hands
// it to the submitter, who pulls it at once. It returns errUnsettled, and
// keeps nothing, when mode asks for a folder that was not changing and it
// was; other failures are logged, and the next capture tries again.
func (p *Provider) takeCheckpoint(ctx context.Context, l *lease, submitter peer.ID, dir string, mode captureMode) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return nil
	}
	rec := l.snapshot()
	id, job := rec.ID(), rec.Lease.Terms.Job
	var before folderState
	if mode != captureFinal {
		if before, err = readFolderState(dir); err != nil {
			return fmt.Errorf("%w: %w", errUnsettled, err)
		}
		// A time to come was set by hand (an unpacked archive, say), not
		// by a write going on now.
		if d := time.Since(before.newest); mode == captureSettled && d >= 0 && d < checkpointSettle {
			return errUnsettled
		}
	}
	num := rec.CheckpointN + 1
	c, _, err := p.d.Store.Import(ctx, dir, content.ImportOptions{Pin: pinCheckpoint(id, num), SkipUnsupported: true,
		Limits: p.outputLimits(rec.Declaration.Request.DiskBytes())})
	if errors.Is(err, content.ErrTooLarge) {
		// Over a cap, it would be every time: the job goes on, and the
		// last checkpoint taken stays the one to resume from.
		p.log.Warn("checkpoint left out", "lease", id, "err", p.namedCap(err))
		return nil
	}
	if err != nil {
		if mode != captureFinal && before.changed(dir) {
			return fmt.Errorf("%w: %w", errChangedWhileRead, err) // a file went while it was read
		}
		p.log.Warn("import checkpoint", "lease", id, "err", err)
		return nil
	}
	if mode != captureFinal && before.changed(dir) {
		if err := p.d.Store.Unpin(ctx, c, pinCheckpoint(id, num)); err != nil {
			p.log.Warn("unpin checkpoint taken while it changed", "lease", id, "err", err)
		}
		p.log.Debug("checkpoint folder changed while it was taken; trying again", "lease", id)
		return errChangedWhileRead
	}
	if c.String() == rec.Checkpoint {
		if err := p.d.Store.Unpin(ctx, c, pinCheckpoint(id, num)); err != nil {
			p.log.Warn("unpin unchanged checkpoint", "lease", id, "err", err)
		}
		return nil
	}
	p.d.Access.Allow(submitter, c)
	p.change(l, func(r *Record) { r.Checkpoint, r.CheckpointN = c.String(), num })
	p.sendEvent(submitter, wire.EventRequest{Lease: id, Job: job, Checkpoint: c.String(), N: num, At: time.Now().UnixMilli()})
	return nil
}

// maxSkipped bounds how many left-out entries are named to the submitter.
const maxSkipped = 20

// importOutput imports the output folder and the logs as one DAG, pinned
// for the submitter to fetch.
func (p *Provider) importOutput(ctx context.Context, l *lease, submitter peer.ID, dir string, res exec.Result, diskBytes uint64) error {
	id := l.snapshot().ID()
	result := filepath.Join(dir, "result")
	if err := os.RemoveAll(result); err != nil {
		return err
	}
	if err := os.MkdirAll(result, 0o755); err != nil {
		return err
	}
	out := filepath.Join(dir, "out")
	if _, err := os.Stat(out); err == nil {
		if err := os.Rename(out, filepath.Join(result, "out")); err != nil {
			return err
		}
	} else if err := os.Mkdir(filepath.Join(result, "out"), 0o755); err != nil {
		return err
	}
	for _, lg := range []struct{ src, name string }{{res.Stdout, "stdout.log"}, {res.Stderr, "stderr.log"}} {
		b, err := os.ReadFile(lg.src)
		if err != nil {
			b = nil // a run that never started has no logs
		}
		if err := os.WriteFile(filepath.Join(result, lg.name), b, 0o644); err != nil {
			return err
		}
	}
	// What the job left that cannot be stored, or must not leave this
	// machine (a link pointing out of the output), is left out and named in
	// the job's status; it never costs the files that were fine.
	var skipped []string
	skip := func(path, reason string) {
		if len(skipped) < maxSkipped {
			skipped = append(skipped, content.ShowPath(path)+": "+reason)
		}
	}
	c, _, err := p.d.Store.Import(ctx, result, content.ImportOptions{Pin: pinOutput(id), SkipUnsupported: true, OnSkip: skip, Limits: p.outputLimits(diskBytes)})
	if err != nil {
		return fmt.Errorf("output: %w", p.namedCap(err))
	}
	p.d.Access.Allow(submitter, c)
	return p.update(l, func(r *Record) { r.Output, r.Skipped = c.String(), skipped })
}
