package provider

import (
	"context"
	"errors"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Staging before the lease (sources.go stages from many sources).
//
// When this node's Match reserves it for a job waiting on its GPUs, it
// starts the same fetch at once, unpinned and off the meter (there is no
// lease yet); the lease's staging then finds the blocks held. A
// reservation that moves cancels the fetch; what it moved stays in the
// store, unpinned, for GC to collect like any cache.

// A job Match gives this provider now, while its GPUs are free, is staged
// the same way before the provider proposes its lease: the GPUs wait
// unleased and off the meter while the inputs arrive, and the lease, once
// signed, goes to running. Its offer still shows the GPUs free, so every
// peer's Match keeps giving the job here; once the job is leased elsewhere
// or withdrawn, the epoch cancels the fetch. A fetch that fails, or
// outlasts wire.StageBeforeLeaseMax, lets the proposal go: the lease then
// stages as it would have, picking up the blocks already here.
//
// Each fetch before the lease runs on the role's task group, so that
// Shutdown waits for it and no fetch outlives the stores.

// Reserved is a job that this node's Match reserved this provider for.
type Reserved struct {
	Job       string
	Submitter peer.ID
}

// prestage is a fetch before the lease, run on the role's task group.
type prestage struct {
	cancel context.CancelFunc
	// first marks a fetch before proposing a lease (not a reservation's):
	// it lasts while the job is open, until wire.StageBeforeLeaseMax
	// after started.
	first   bool
	started time.Time
}

// Prestage starts fetching the inputs of the jobs this node's Match
// reserved it for, and cancels the fetches of jobs no longer reserved for
// it. It returns at once.
func (p *Provider) Prestage(jobs []Reserved) {
	if !p.cfg.Prestage || p.ctx.Err() != nil || p.Draining() {
		return
	}
	want := make(map[string]Reserved, len(jobs))
	for _, r := range jobs {
		want[r.Job] = r
	}
	// A job leased here keeps its fetch: the lease's staging waits for it
	// rather than lose the blocks in flight. A lease's lock is never taken
	// under the registry's (active copies it first).
	for _, lr := range p.leases.active() {
		job := lr.snapshot().Lease.Terms.Job
		if _, ok := want[job]; !ok {
			want[job] = Reserved{}
		}
	}
	// A reserved job whose data another provider holds is likely to go
	// there (data gravity): fetching it here would likely be for nothing.
	elsewhere := make(map[string]bool)
	if p.d.HeldElsewhere != nil {
		for _, r := range jobs {
			if oj, ok := p.d.Jobs.Job(r.Job); ok {
				if roots := inputRoots(oj); len(roots) > 0 && p.d.HeldElsewhere(roots) {
					elsewhere[r.Job] = true
				}
			}
		}
	}
	p.src.reserve(jobs, want, elsewhere)
}

// reserve cancels the fetches before the lease of the jobs not in want,
// forgets the tried jobs that are no longer open, and starts a fetch for
// each of jobs that has none, unless another provider holds its data.
func (s *sourcing) reserve(jobs []Reserved, want map[string]Reserved, elsewhere map[string]bool) {
	// Which jobs are still open is the view's to say (Jobs), and it is
	// asked before s.mu is taken, not under it. A job whose fetch began in
	// between counts as open, as the pass that began it found it.
	s.mu.Lock()
	s.init()
	known := make(map[string]bool, len(s.pre)+len(s.tried))
	for job := range s.pre {
		known[job] = true
	}
	for job := range s.tried {
		known[job] = true
	}
	s.mu.Unlock()
	closed := make(map[string]bool)
	for job := range known {
		if _, open := s.d.Jobs.Job(job); !open {
			closed[job] = true
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for job, ps := range s.pre {
		if _, ok := want[job]; ok {
			continue
		}
		// A fetch before proposing lasts while the job is open: the pass
		// that gave it here may have been a fast one.
		if ps.first && !closed[job] {
			continue
		}
		ps.cancel()
	}
	for job := range s.tried {
		if closed[job] {
			delete(s.tried, job)
		}
	}
	for _, r := range jobs {
		if _, ok := s.pre[r.Job]; !ok && r.Submitter != "" && !elsewhere[r.Job] {
			s.startPrestageLocked(r, false)
		}
	}
}

// inputRoots returns the roots of a job's inputs, by their text; those
// that do not decode are left out.
func inputRoots(oj *view.OpenJob) []string {
	var out []string
	for _, in := range oj.Body.Declaration.Data {
		if c, err := cid.Decode(in.Source); err == nil {
			out = append(out, c.String())
		}
	}
	return out
}

// startPrestageLocked starts fetching r's inputs before the lease, on the
// role's task group so that Shutdown waits for the fetch; s.mu is held.
// With first, the fetch is before proposing: when it ends, the job is
// marked tried and a pass is asked for. It reports whether the fetch
// started: not once the provider is stopping.
func (s *sourcing) startPrestageLocked(r Reserved, first bool) bool {
	ctx, cancel := context.WithCancel(s.ctx)
	ps := &prestage{cancel: cancel, first: first, started: time.Now()}
	s.pre[r.Job] = ps
	started := s.tasks.Go(func() {
		defer cancel()
		defer s.recoverPanic("prestage")
		// Before proposing, the submitter hears at once that this provider
		// is staging the job, even if this fetch then waits for another of
		// the same root here: a provider given a job that neither proposes
		// nor stages is taken for a squatter. A refusal ends the fetch
		// before it starts, and the proposal goes.
		allowed := true
		if first {
			if _, _, err := s.askSources(ctx, r.Job, "", r.Submitter, cid.Undef); err != nil {
				s.log.Info("staging before the lease refused", "job", r.Job, "err", err)
				allowed = false
			}
		}
		if allowed {
			s.prestage(ctx, r)
		}
		s.mu.Lock()
		if s.pre[r.Job] == ps {
			delete(s.pre, r.Job)
		}
		if first {
			s.tried[r.Job] = true
		}
		s.mu.Unlock()
		if first && s.d.Rematch != nil {
			s.d.Rematch()
		}
	})
	if !started {
		delete(s.pre, r.Job)
		cancel()
	}
	return started
}

// stagingFirst reports whether the proposal of a lease for oj, a job Match
// gives this provider now, is to wait while its inputs are fetched, and
// laid out, here first; it starts that fetch if none runs. A job whose
// inputs are all staged and laid out here, or whose fetch before proposing
// already ended or has run wire.StageBeforeLeaseMax, is proposed at once;
// so is one whose data another provider holds, unless its fetch here has
// begun: Match moves such a job to the holder as soon as it has room (data
// gravity), so staging here would likely be for nothing, and the lease
// stages from that holder.
func (s *sourcing) stagingFirst(oj *view.OpenJob) bool {
	data := oj.Body.Declaration.Data
	if !s.cfg.Prestage || len(data) == 0 || s.ctx.Err() != nil {
		return false
	}
	missing := false
	var roots []string
	for _, in := range data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return false // the lease's staging names the error
		}
		if !s.stagedWhole(c) || !s.inputs.laidOutHere(c) {
			missing = true
		}
		roots = append(roots, c.String())
	}
	if !missing {
		return false
	}
	heldElsewhere := s.d.HeldElsewhere != nil && s.d.HeldElsewhere(roots)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if ps, ok := s.pre[oj.ID]; ok {
		return time.Since(ps.started) < wire.StageBeforeLeaseMax
	}
	if heldElsewhere || s.tried[oj.ID] {
		return false
	}
	return s.startPrestageLocked(Reserved{Job: oj.ID, Submitter: oj.Submitter}, true)
}

// prestage fetches a reserved job's inputs, without pinning them, and
// lays them out.
func (s *sourcing) prestage(ctx context.Context, r Reserved) {
	j, ok := s.d.Jobs.Job(r.Job)
	if !ok || j.Submitter != r.Submitter {
		return
	}
	for i, in := range j.Body.Declaration.Data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return
		}
		st, err := s.fetchStaged(ctx, r.Job, "", r.Submitter, c, content.FetchOptions{MaxBytes: s.cfg.Limits.MaxBytes, Progress: s.d.Metrics.prestaged()})
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Info("staging before the lease stopped", "job", r.Job, "input", i, "err", err)
			}
			return
		}
		s.log.Info("staged before the lease", "job", r.Job, "input", i, "bytes", st.BytesFetched, "sources", len(st.Sources))
		// Laid out now, the lease only bind-mounts it.
		if _, err := s.inputs.layOut(ctx, c, ""); err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Info("laying out before the lease stopped", "job", r.Job, "input", i, "err", err)
			}
			return
		}
	}
}
