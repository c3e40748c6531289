package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Staging from many sources, and before the lease.
//
// A provider about to stage a job's input asks the job's submitter
// (wire.ProtoStage) which other providers hold it; the submitter has asked
// each to serve it here (wire.ProtoRelay), and the fetch takes the missing
// blocks from all of them at once, the submitter serving only what they
// cannot: its uplink is the scarce one. When no provider holds the root
// yet but another began fetching it first, this one waits for it to finish
// and fetches from it, rather than take a second copy from the submitter.
// A provider relays a
// root only for the submitter it staged it for, and only to the provider
// that submitter names: the submitter decides who may read its data, as
// when it is the only source.
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

// Reserved is a job that this node's Match reserved this provider for.
type Reserved struct {
	Job       string
	Submitter peer.ID
}

// sourcing is the provider's state for staging from many sources.
type sourcing struct {
	mu sync.Mutex // guards the maps; never held across I/O
	// heldFor records the roots this node staged whole, by the submitter
	// it staged them for: the only submitter it relays them for.
	heldFor map[cid.Cid]map[peer.ID]struct{}
	// fetching serialises fetches of one root: a second job staging the
	// same data waits for the first, then finds it held, rather than
	// moving every block twice.
	fetching map[cid.Cid]chan struct{}
	pre      map[string]*prestage // job -> fetch before the lease
	// tried records the jobs whose fetch before proposing ended, however
	// it ended: their proposals go ahead.
	tried map[string]bool
}

type prestage struct {
	cancel context.CancelFunc
	done   chan struct{}
	// first marks a fetch before proposing a lease (not a reservation's):
	// it lasts while the job is open, until wire.StageBeforeLeaseMax
	// after started.
	first   bool
	started time.Time
}

func (s *sourcing) init() {
	if s.heldFor == nil {
		s.heldFor = make(map[cid.Cid]map[peer.ID]struct{})
		s.fetching = make(map[cid.Cid]chan struct{})
		s.pre = make(map[string]*prestage)
		s.tried = make(map[string]bool)
	}
}

// lockRoot waits until no other fetch of root is running here and claims
// it; the caller calls the returned func when its fetch ends.
func (s *sourcing) lockRoot(ctx context.Context, root cid.Cid) (func(), error) {
	for {
		s.mu.Lock()
		s.init()
		ch, busy := s.fetching[root]
		if !busy {
			ch = make(chan struct{})
			s.fetching[root] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.fetching, root)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *sourcing) held(submitter peer.ID, root cid.Cid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	m := s.heldFor[root]
	if m == nil {
		m = make(map[peer.ID]struct{})
		s.heldFor[root] = m
	}
	m[submitter] = struct{}{}
}

// stagedWhole reports whether this node staged root whole, for any
// submitter: its blocks are here, unless retention has let them go since.
func (s *sourcing) stagedWhole(root cid.Cid) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heldFor[root]) > 0
}

func (s *sourcing) holds(submitter peer.ID, root cid.Cid) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.heldFor[root][submitter]
	return ok
}

// fetchStaged fetches root, an input of job, from its submitter and the
// other providers the submitter names. lease is empty before the lease.
// Concurrent fetches of one root run one after the other.
func (p *Provider) fetchStaged(ctx context.Context, job, lease string, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	unlock, err := p.src.lockRoot(ctx, root)
	if err != nil {
		return content.FetchStats{}, err
	}
	defer unlock()
	if p.d.Path != nil {
		if err := p2p.AwaitDirect(ctx, p.d.Path, from, "the submitter", p2p.DirectWait); err != nil {
			return content.FetchStats{}, err
		}
	}
	// The submitter's uplink is the scarce one: while other providers
	// serve the data, it is only the fallback.
	var sources []peer.ID
	o.Fallback = []peer.ID{from}
	// Data already here (data gravity's whole point) needs no sources,
	// and waits for nobody: the fetch finds every block held and only pins
	// the root; should retention have let some go, the submitter sends
	// them (before the lease, only if it allowed this node).
	// A job this node submitted had its inputs imported here: there is no
	// one to ask or wait for.
	if from != p.d.Self && !p.src.stagedWhole(root) && (!p.cfg.SingleSource || lease == "") {
		more, err := p.awaitSources(ctx, job, lease, from, root)
		if err != nil {
			if lease == "" {
				// Not allowed before the lease: nothing to fetch yet.
				return content.FetchStats{}, err
			}
			p.log.Info("staging from the submitter alone", "job", job, "err", err)
		}
		if !p.cfg.SingleSource {
			sources = append(sources, more...)
		}
	}
	st, err := p.d.Fetcher.FetchFrom(ctx, sources, root, o)
	p.countFetched(from, st)
	if err != nil {
		return st, err
	}
	p.src.held(from, root)
	return st, nil
}

// holderWait bounds how long a provider waits for another to finish
// fetching a root before it fetches from the submitter too; holderPoll is
// how often it asks meanwhile.
const (
	holderWait = 10 * time.Minute
	holderPoll = time.Second
)

// awaitSources asks the submitter which other providers serve root. When
// none holds it yet but one began fetching it first, it waits for that one
// to finish, asking again every holderPoll: fetching from it then costs the
// submitter's uplink nothing, where fetching now would cost a second copy.
func (p *Provider) awaitSources(ctx context.Context, job, lease string, submitter peer.ID, root cid.Cid) ([]peer.ID, error) {
	deadline := time.Now().Add(holderWait)
	for {
		holders, staging, err := p.askSources(ctx, job, lease, submitter, root)
		if err != nil || len(holders) > 0 || !staging || p.cfg.SingleSource || time.Now().After(deadline) {
			return holders, err
		}
		p.log.Debug("waiting for another provider to finish staging", "job", job, "root", root)
		t := time.NewTimer(holderPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// askSources asks the submitter to let this node stage root, which other
// providers serve it, and whether another is fetching it now.
func (p *Provider) askSources(ctx context.Context, job, lease string, submitter peer.ID, root cid.Cid) (holders []peer.ID, staging bool, err error) {
	var rep wire.StageReply
	if err := p.d.Calls.Call(ctx, submitter, wire.ProtoStage, wire.StageRequest{Job: job, Lease: lease}, &rep); err != nil {
		return nil, false, fmt.Errorf("ask the submitter to stage: %w", err)
	}
	m, err := rep.Parsed()
	if err != nil {
		return nil, false, err
	}
	for _, q := range m[root] {
		if q != p.d.Self && q != submitter {
			holders = append(holders, q)
		}
	}
	st, err := rep.ParsedStaging()
	if err != nil {
		return nil, false, err
	}
	return holders, slices.ContainsFunc(st[root], func(q peer.ID) bool { return q != p.d.Self }), nil
}

func (p *Provider) countFetched(submitter peer.ID, st content.FetchStats) {
	if p.d.Metrics == nil || p.d.Metrics.Fetched == nil {
		return
	}
	if len(st.Sources) == 0 {
		p.d.Metrics.Fetched.WithLabelValues("submitter").Add(float64(st.BytesFetched))
		return
	}
	for _, s := range st.Sources {
		kind := "provider"
		if s.Peer == submitter {
			kind = "submitter"
		}
		p.d.Metrics.Fetched.WithLabelValues(kind).Add(float64(s.Bytes))
	}
}

// HandleRelay answers a submitter asking this node to serve a root it
// staged for that submitter's jobs to another of its providers.
func (p *Provider) HandleRelay(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.RelayRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	root, to, err := req.Parsed()
	if err != nil {
		return nil, err
	}
	if !p.src.holds(from, root) {
		return nil, p2p.Refuse(wire.CodeNotHeld, fmt.Errorf("%s is not held here for %s", root, from))
	}
	p.d.Access.Allow(to, root)
	p.log.Debug("relaying", "root", root, "submitter", from, "to", to)
	return struct{}{}, nil
}

// Prestage starts fetching the inputs of the jobs this node's Match
// reserved it for, and cancels the fetches of jobs no longer reserved for
// it. It returns at once.
func (p *Provider) Prestage(jobs []Reserved) {
	if !p.cfg.Prestage || p.ctx.Err() != nil {
		return
	}
	want := make(map[string]Reserved, len(jobs))
	for _, r := range jobs {
		want[r.Job] = r
	}
	// A job leased here keeps its fetch: the lease's staging waits for it
	// rather than lose the blocks in flight.
	p.mu.Lock()
	leases := slices.Collect(maps.Values(p.leases))
	p.mu.Unlock()
	// A lease's lock is never taken under p.mu.
	for _, l := range leases {
		l.mu.Lock()
		job := l.rec.Lease.Terms.Job
		l.mu.Unlock()
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
	p.src.mu.Lock()
	defer p.src.mu.Unlock()
	p.src.init()
	for job, ps := range p.src.pre {
		if _, ok := want[job]; ok {
			continue
		}
		// A fetch before proposing lasts while the job is open: the pass
		// that gave it here may have been a fast one.
		if _, open := p.d.Jobs.Job(job); ps.first && open {
			continue
		}
		ps.cancel()
	}
	for job := range p.src.tried {
		if _, open := p.d.Jobs.Job(job); !open {
			delete(p.src.tried, job)
		}
	}
	for _, r := range jobs {
		if _, ok := p.src.pre[r.Job]; !ok && r.Submitter != "" && !elsewhere[r.Job] {
			p.startPrestageLocked(r, false)
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

// startPrestageLocked starts fetching r's inputs before the lease;
// p.src.mu is held. With first, the fetch is before proposing: when it
// ends, the job is marked tried and a pass is asked for.
func (p *Provider) startPrestageLocked(r Reserved, first bool) {
	ctx, cancel := context.WithCancel(p.ctx)
	ps := &prestage{cancel: cancel, done: make(chan struct{}), first: first, started: time.Now()}
	p.src.pre[r.Job] = ps
	go func() {
		defer close(ps.done)
		defer cancel()
		defer p.recoverPanic("prestage")
		// Before proposing, the submitter hears at once that this provider
		// is staging the job, even if this fetch then waits for another of
		// the same root here: a provider given a job that neither proposes
		// nor stages is taken for a squatter. A refusal ends the fetch
		// before it starts, and the proposal goes.
		allowed := true
		if first {
			if _, _, err := p.askSources(ctx, r.Job, "", r.Submitter, cid.Undef); err != nil {
				p.log.Info("staging before the lease refused", "job", r.Job, "err", err)
				allowed = false
			}
		}
		if allowed {
			p.prestage(ctx, r)
		}
		p.src.mu.Lock()
		if p.src.pre[r.Job] == ps {
			delete(p.src.pre, r.Job)
		}
		if first {
			p.src.tried[r.Job] = true
		}
		p.src.mu.Unlock()
		if first && p.d.Rematch != nil {
			p.d.Rematch()
		}
	}()
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
func (p *Provider) stagingFirst(oj *view.OpenJob) bool {
	data := oj.Body.Declaration.Data
	if !p.cfg.Prestage || len(data) == 0 || p.ctx.Err() != nil {
		return false
	}
	missing := false
	var roots []string
	for _, in := range data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return false // the lease's staging names the error
		}
		if !p.src.stagedWhole(c) || !p.laidOutHere(c) {
			missing = true
		}
		roots = append(roots, c.String())
	}
	if !missing {
		return false
	}
	heldElsewhere := p.d.HeldElsewhere != nil && p.d.HeldElsewhere(roots)
	p.src.mu.Lock()
	defer p.src.mu.Unlock()
	p.src.init()
	if ps, ok := p.src.pre[oj.ID]; ok {
		return time.Since(ps.started) < wire.StageBeforeLeaseMax
	}
	if heldElsewhere || p.src.tried[oj.ID] {
		return false
	}
	p.startPrestageLocked(Reserved{Job: oj.ID, Submitter: oj.Submitter}, true)
	return true
}

// prestage fetches a reserved job's inputs, without pinning them, and
// lays them out.
func (p *Provider) prestage(ctx context.Context, r Reserved) {
	j, ok := p.d.Jobs.Job(r.Job)
	if !ok || j.Submitter != r.Submitter {
		return
	}
	for i, in := range j.Body.Declaration.Data {
		c, err := cid.Decode(in.Source)
		if err != nil {
			return
		}
		st, err := p.fetchStaged(ctx, r.Job, "", r.Submitter, c, content.FetchOptions{MaxBytes: p.cfg.Limits.MaxBytes, Progress: p.d.Metrics.prestaged()})
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.Info("staging before the lease stopped", "job", r.Job, "input", i, "err", err)
			}
			return
		}
		p.log.Info("staged before the lease", "job", r.Job, "input", i, "bytes", st.BytesFetched, "sources", len(st.Sources))
		// Laid out now, the lease only bind-mounts it.
		if _, err := p.layOut(ctx, c, ""); err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.Info("laying out before the lease stopped", "job", r.Job, "input", i, "err", err)
			}
			return
		}
	}
}
