package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/ipfs/go-cid"
)

// Pin reasons of the content a provider keeps for a lease.
func pinInput(lease string) string  { return "input of lease " + lease }
func pinOutput(lease string) string { return "output of lease " + lease }
func pinImage(lease string) string  { return "image of lease " + lease }
func pinCheckpoint(lease string, n int) string {
	return fmt.Sprintf("checkpoint %d of lease %s", n, lease)
}

// staged is what staging readies for the run, filled in as it goes, so
// that release finds what to give back however far staging got.
type staged struct {
	// work is the folder the output and checkpoint go in: the job's disk,
	// or the lease folder where this node has no disks (disk nil).
	work   string
	disk   *exec.Disk
	inputs []exec.Mount
	img    *exec.ImageRoot
	// releaseImage gives back the image's unpacked layers; nil until they
	// are acquired.
	releaseImage func()
	// net is a gang part's private network, and env what the part sees
	// of its gang; nil for a job that is no gang's part (gang.go).
	net GangNet
	env map[string]string
}

// stage is the lease's staging: fetch every input completely, then lay it
// out for the mounts; then the image and the checkpoint to resume from.
// It reports whether the run may start; when not, it has recorded how the
// lease ended.
func (lr *leaseRunner) stage(ctx context.Context, st *staged) bool {
	rec := lr.snapshot()
	t := rec.Lease.Terms
	decl := rec.Declaration
	log := lr.log.With("lease", t.ID, "job", t.Job)

	lr.change(func(r *Record) { r.State = Staging })
	// The job's disk first: a resumed run's checkpoint is laid out on it.
	var diskErr error
	st.work, st.disk, diskErr = lr.makeDisk(ctx, decl.Request.DiskBytes())
	stagingErr := diskErr
	if diskErr == nil {
		st.inputs, stagingErr = lr.stageInputs(ctx, decl.Data)
	}
	if stagingErr == nil && decl.Work.Image != "" {
		var rel func()
		if st.img, rel, stagingErr = lr.stageImage(ctx, decl.Work, log); stagingErr == nil {
			st.releaseImage = rel
		}
	}
	if cp := decl.Output.Checkpoints; stagingErr == nil && cp != nil && cp.From != "" {
		stagingErr = lr.stageCheckpoint(ctx, cp.From, filepath.Join(st.work, "ckpt"))
	}

	if diskErr != nil && ctx.Err() == nil {
		log.Warn("no disk for the job", "err", diskErr)
		lr.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: diskErr.Error()})
		return false
	}
	if stagingErr == nil {
		lr.noteRelay()
		return true
	}
	switch {
	case errors.Is(context.Cause(ctx), ErrWithdrawn):
		lr.end(ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter, Reason: "withdrawn during staging"})
	case errors.Is(context.Cause(ctx), ErrReleasedUnrun):
		lr.end(ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: ErrReleasedUnrun.Error()})
	case errors.Is(context.Cause(ctx), ErrPreempted):
		lr.end(ledger.Ending{Outcome: ledger.OutcomePreempted, Attribution: ledger.AttributionProvider, Reason: context.Cause(ctx).Error() + " (during staging)"})
	case ctx.Err() != nil:
		lr.end(ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: "provider stopped during staging"})
	case refusedContent(stagingErr):
		// Not this node's fault, and no other provider would take it:
		// the job fails here, once.
		log.Warn("content of the job refused", "err", stagingErr)
		lr.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob, Reason: "refused " + stagingErr.Error()})
	default:
		log.Warn("staging failed", "err", stagingErr)
		lr.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionNetwork, Reason: "staging: " + stagingErr.Error()})
	}
	return false
}

// stageInputs fetches every input of a lease and lays it out (laidout.go).
func (lr *leaseRunner) stageInputs(ctx context.Context, data []market.Input) ([]exec.Mount, error) {
	rec := lr.snapshot()
	job, lease := rec.Lease.Terms.Job, rec.ID()
	var inputs []exec.Mount
	for i, in := range data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return nil, fmt.Errorf("data[%d].source: %w", i, err)
		}
		if _, err := lr.src.fetchStaged(ctx, job, lease, lr.submitter, c, content.FetchOptions{Pin: pinInput(lease), MaxBytes: lr.cfg.Limits.MaxBytes, Progress: lr.d.Metrics.Staged}); err != nil {
			return nil, fmt.Errorf("data[%d] (%s): fetch: %w", i, c, err)
		}
		var dst string
		err = lr.handle(fmt.Sprintf("laying out data[%d] (%s)", i, c), func() (err error) {
			dst, err = lr.inputs.layOut(ctx, c, lease)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("data[%d] (%s): lay out: %w", i, c, err)
		}
		inputs = append(inputs, exec.Mount{Source: dst, Target: in.Mount})
	}
	return inputs, nil
}

// stageCheckpoint lays out the checkpoint a resumed run starts from in the
// folder mounted, writable, at the job's checkpoint path: the job finds it
// where it left it. Exported straight there, it costs one copy, the same as
// an input; the sandbox hands the folder to the job's user.
func (lr *leaseRunner) stageCheckpoint(ctx context.Context, src, dst string) error {
	lease := lr.snapshot().ID()
	c, err := cid.Decode(src)
	if err != nil {
		return fmt.Errorf("output.checkpoints.from: %w", err)
	}
	if _, err := lr.src.fetch(ctx, lr.submitter, c, content.FetchOptions{Pin: pinInput(lease), MaxBytes: lr.cfg.Limits.MaxBytes, Progress: lr.d.Metrics.Staged}); err != nil {
		return fmt.Errorf("the checkpoint to resume from (%s): fetch: %w", c, err)
	}
	if _, rank, ok := gangPart(lr.snapshot()); ok {
		// A gang goes on from a folder of one <rank> folder a part; a
		// part that took no checkpoint has none and starts again.
		mine, err := lr.d.Store.Resolve(ctx, c, strconv.Itoa(rank))
		if errors.Is(err, content.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the checkpoint to resume part %d from (%s): %w", rank, c, err)
		}
		c = mine
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	err = lr.handle(fmt.Sprintf("laying out the checkpoint to resume from (%s)", c), func() error {
		return lr.d.Store.Export(ctx, c, dst, content.ExportOptions{Limits: lr.cfg.Limits})
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
func (lr *leaseRunner) stageImage(ctx context.Context, w market.Work, log *slog.Logger) (*exec.ImageRoot, func(), error) {
	lease := lr.snapshot().ID()
	if lr.d.Images == nil {
		return nil, nil, errors.New("this provider cannot run images")
	}
	root, err := cid.Decode(w.Image)
	if err != nil {
		return nil, nil, fmt.Errorf("work.image: %w", err)
	}
	if lr.cfg.ImagePull && w.ImageRef != "" {
		got, err := lr.d.Images.Pull(ctx, w.ImageRef, pinImage(lease))
		if err != nil {
			return nil, nil, fmt.Errorf("pull image %s: %w", w.ImageRef, err)
		}
		if got != root {
			return nil, nil, fmt.Errorf("image %s pulled as %s, but the job names %s", w.ImageRef, got, root)
		}
		log.Info("image pulled", "ref", w.ImageRef, "cid", root)
	} else if _, err := lr.src.fetch(ctx, lr.submitter, root, content.FetchOptions{Pin: pinImage(lease), Progress: lr.d.Metrics.Staged}); err != nil {
		return nil, nil, fmt.Errorf("fetch image %s: %w", root, err)
	}
	var img *exec.ImageRoot
	var release func()
	err = lr.handle(fmt.Sprintf("unpacking the image (%s)", root), func() (err error) {
		img, release, err = lr.d.Images.Prepare(ctx, root)
		return err
	})
	if err != nil {
		return nil, nil, err // Prepare names the image, and the layer
	}
	return img, release, nil
}

// makeDisk makes the filesystem that bounds what the job writes, and
// returns the folder its output and checkpoint go in: the disk, or the
// lease folder itself where this node has no disks.
func (lr *leaseRunner) makeDisk(ctx context.Context, bytes uint64) (string, *exec.Disk, error) {
	dir := lr.dir()
	if lr.d.Disks == nil {
		return dir, nil, nil
	}
	d, err := lr.d.Disks.Mount(ctx, dir, bytes)
	if err != nil {
		return dir, nil, err
	}
	return d.Path, &d, nil
}
