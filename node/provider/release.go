package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/content"
	"github.com/ipfs/go-cid"
)

// release ends a lease: the meter stops, the job's secrets are dropped,
// the GPUs go back into the offer and the release is announced. The final
// receipt follows (settle).
func (lr *leaseRunner) release(end time.Time) {
	lr.dropSecrets()
	lr.change(func(r *Record) { r.End, r.State = end, Released })
	rec := lr.snapshot()
	t := rec.Lease.Terms

	// The GPUs go back first: the final receipt's countersignature may take
	// a while, and nothing runs on them any more.
	lr.onRelease(t)

	body := rec.release()
	if taskOf(t.Job) == "" {
		// A task's release is announced by its submitter when it
		// countersigns the final receipt, or by settle when it cannot.
		lr.announceRelease(body)
	}
	lr.log.Info("lease released", "lease", t.ID, "outcome", body.Outcome, "held", time.Duration(body.HeldMs)*time.Millisecond)
}

// cleanup removes what a lease left on disk and in the runtime.
func (lr *leaseRunner) cleanup(ctx context.Context) {
	id := lr.snapshot().ID()
	lr.inputs.doneWithLaidOut(id)
	dir := lr.dir()
	if lr.d.Runner != nil {
		if err := lr.d.Runner.Cleanup(ctx, id, filepath.Join(dir, "run")); err != nil {
			lr.log.Warn("cleanup", "lease", id, "err", err)
		}
	}
	if lr.d.Disks != nil {
		// Before the folder goes: never delete through a mount.
		if err := lr.d.Disks.Remove(dir); err != nil {
			lr.log.Warn("remove the job's disk", "lease", id, "err", err)
			return
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		lr.log.Warn("remove lease dir", "lease", id, "err", err)
	}
	lr.disk.released(id)
}

// releaseImage gives back the image's unpacked layers (rel, nil if staging
// never acquired them) once the sandbox's overlay is gone; they stay
// unpacked in the cache for the next job, so the image's own pin can go.
func (lr *leaseRunner) releaseImage(rel func()) {
	if rel != nil {
		rel()
	}
	rec := lr.snapshot()
	if c, err := cid.Decode(rec.Declaration.Work.Image); err == nil {
		if err := lr.d.Store.Unpin(lr.hard, c, pinImage(rec.ID())); err != nil && !errors.Is(err, content.ErrNotFound) {
			lr.log.With("lease", rec.ID(), "job", rec.Lease.Terms.Job).Warn("unpin image", "err", err)
		}
	}
}
