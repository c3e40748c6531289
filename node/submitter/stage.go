package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// relayTimeout bounds asking one holder to serve a root to a new provider:
// a holder slow to answer is left out rather than delay the staging.
const relayTimeout = 3 * time.Second

// stageState is what the submitter knows for staging from many sources:
// which provider this node's last Match reserved for each of its jobs, and
// which providers have staged each root for its jobs (they reached the run
// step, so they held the whole DAG then).
type stageState struct {
	*parts // immutable after New
	// mu guards the maps. A state lock: never held across I/O (the relay
	// requests go out after it). It is taken before a jobTracker's mu,
	// whose records it compares, never while one is held, and never with
	// the registry's.
	mu       sync.Mutex
	reserved map[string]peer.ID                // job -> provider reserved for it
	holders  map[cid.Cid]map[peer.ID]time.Time // root -> providers that staged it, when last known
	// asked is when each provider first asked to stage each job it is
	// staging (leased to it, or queued and staged before the lease): of
	// two providers fetching the same root, the later one may wait for the
	// earlier, never the other way round.
	asked map[stager]time.Time
}

// stager is a provider staging one of this node's jobs.
type stager struct {
	job string
	by  peer.ID
}

// holdersKept bounds how long a provider that staged a root is named as a
// source: about a provider's retention window, after which it may have let
// the blocks go (it would then refuse to relay, costing one round trip).
const holdersKept = 24 * time.Hour

// RecordReservations keeps, for this node's queued jobs, the provider that
// Match reserved for each: such a provider may stage the job's inputs
// before it is leased.
func (s *Submitter) RecordReservations(res market.Result) {
	m := make(map[string]peer.ID)
	for _, r := range res.Reservations {
		if j := s.jobs.inMemory(r.Job); j != nil && j.state() == api.JobQueued {
			if p, err := peer.Decode(r.Provider); err == nil {
				m[r.Job] = p
			}
		}
	}
	s.stage.mu.Lock()
	s.stage.reserved = m
	s.stage.mu.Unlock()
}

// HandleStage answers a provider about to stage a job's inputs: the lease
// holder, or the provider reserved for the queued job, is allowed the job's
// roots, and told which other providers hold each and agreed to serve it.
// Anyone else is refused. A holder is named only after it has granted the
// requester access, so that the requester's first request succeeds.
func (s *Submitter) HandleStage(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.StageRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	if err := wire.CheckStage(req); err != nil {
		return nil, err
	}
	j := s.jobs.get(req.Job)
	if j == nil {
		return nil, unknownJob(req.Job)
	}
	s.stage.mu.Lock()
	reserved := s.stage.reserved[req.Job] == from
	s.stage.mu.Unlock()
	// Asked before the job's lock, not under it: the view and Match are
	// other parts of the node. A queued job's inputs go to a provider its
	// Match gave the job, as a proposal from it would be accepted
	// (claims.go), and to no other: not to any provider with an offer.
	now := time.Now()
	assigned := false
	if req.Lease == "" && !reserved && j.state() == api.JobQueued {
		assigned = s.claims.assignedTo(j, from.String(), now)
	}
	roots, allowed := j.stageAsk(req.Lease, from, reserved, assigned, now)
	jobs := s.jobs.live()
	holders := s.stage.holdersOf(from, roots, jobs)
	var staging map[cid.Cid][]peer.ID
	if allowed {
		staging = s.stage.stagingOf(req.Job, from, roots, holders, jobs)
	}
	if !allowed {
		// Refused, it stops staging the job (its prestage ends here):
		// nobody is to wait for it any more.
		s.stage.forgetStager(req.Job, from)
		return nil, p2p.Refuse(wire.CodeNotReserved, fmt.Errorf("job %s is neither leased to nor reserved for %s", req.Job, from))
	}
	for _, c := range roots {
		s.d.Access.Allow(from, c)
	}
	// A provider that staged a root before a lease it then did not get
	// holds the root all the same, but only a run makes a holder: asked
	// to relay, an earlier stager agrees once it holds the whole root, and
	// is then a source rather than someone to wait for.
	sources := s.stage.relays(ctx, from, unite(holders, staging))
	s.stage.noteStagedHolders(sources, staging)
	return wire.StageReply{Sources: sources, Staging: rootSources(without(staging, sources))}, nil
}

// stageAsk decides whether from may stage the job's inputs: it holds the
// job's lease and the job is renting or running, or the job is queued and
// reserved for it by this node's Match (reserved) or, staging before a
// proposal, assigned to it by this node's Match (assigned) and not
// avoided. It returns the job's roots, and records a queued job's early
// stager as staging, not squatting.
func (j *jobTracker) stageAsk(lease string, from peer.ID, reserved, assigned bool, now time.Time) (roots []cid.Cid, allowed bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.rec
	leased := lease != "" && leased(r, lease, from) == nil &&
		(r.State == api.JobRenting || r.State == api.JobRunning)
	queued := r.State == api.JobQueued
	if queued && lease == "" {
		if !reserved {
			// A provider Match gave the job may propose for it and,
			// leased, read its inputs: staging them first grants it
			// nothing more. One the job avoids may do neither.
			reserved = assigned && !slices.Contains(r.Avoid, from.String())
		}
		if reserved {
			(failureWatch{j}).noteStaging(from, now)
		}
	}
	return r.contentRoots(), leased || (queued && reserved)
}

// unite returns, for each root, the providers of a and b, each once.
func unite(a, b map[cid.Cid][]peer.ID) map[cid.Cid][]peer.ID {
	out := make(map[cid.Cid][]peer.ID, len(a)+len(b))
	for _, m := range []map[cid.Cid][]peer.ID{a, b} {
		for c, ps := range m {
			for _, p := range ps {
				if !slices.Contains(out[c], p) {
					out[c] = append(out[c], p)
				}
			}
		}
	}
	return out
}

// without returns staging less the providers that serve each root.
func without(staging map[cid.Cid][]peer.ID, sources []wire.RootSources) map[cid.Cid][]peer.ID {
	serving := make(map[string][]string, len(sources))
	for _, rs := range sources {
		serving[rs.Root] = rs.Providers
	}
	out := make(map[cid.Cid][]peer.ID, len(staging))
	for c, ps := range staging {
		for _, p := range ps {
			if !slices.Contains(serving[c.String()], p.String()) {
				out[c] = append(out[c], p)
			}
		}
	}
	return out
}

// noteStagedHolders records as holders the stagers that agreed to serve
// a root: they finished staging it.
func (st *stageState) noteStagedHolders(sources []wire.RootSources, staging map[cid.Cid][]peer.ID) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, rs := range sources {
		c, err := cid.Decode(rs.Root)
		if err != nil {
			continue
		}
		for _, q := range rs.Providers {
			p, err := peer.Decode(q)
			if err != nil || !slices.Contains(staging[c], p) {
				continue
			}
			if st.holders == nil {
				st.holders = make(map[cid.Cid]map[peer.ID]time.Time)
			}
			if st.holders[c] == nil {
				st.holders[c] = make(map[peer.ID]time.Time)
			}
			st.holders[c][p] = now
		}
	}
}

// stagingOf returns, for each root of job that no provider holds, the
// providers of this node's other jobs that are fetching it now (leased, or
// staging before the lease) and asked to stage before job's provider did.
// roots are job's; jobs are the jobs in memory.
func (st *stageState) stagingOf(job string, to peer.ID, roots []cid.Cid, holders map[cid.Cid][]peer.ID, jobs map[string]*jobTracker) map[cid.Cid][]peer.ID {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.asked == nil {
		st.asked = make(map[stager]time.Time)
	}
	for a := range st.asked {
		still := false
		if j, ok := jobs[a.job]; ok {
			j.view(func(r *Record) { still = stagingBy(r, a.by) })
		}
		if !still {
			delete(st.asked, a)
		}
	}
	me := stager{job: job, by: to}
	if _, ok := st.asked[me]; !ok {
		st.asked[me] = now
	}
	// Each provider stages a root from the time it first asked for any job
	// reading it (the same job counts too: two passes between epochs may
	// each have given it the job). Waiting only on providers that came
	// first, by that one time per root, no two providers ever wait on each
	// other.
	first := make(map[peer.ID]map[cid.Cid]time.Time)
	for a, at := range st.asked {
		theirs := roots
		if a.job != job {
			j, ok := jobs[a.job]
			if !ok {
				continue
			}
			j.view(func(r *Record) { theirs = r.contentRoots() })
		}
		for _, c := range theirs {
			if !slices.Contains(roots, c) {
				continue
			}
			if first[a.by] == nil {
				first[a.by] = make(map[cid.Cid]time.Time)
			}
			if t, ok := first[a.by][c]; !ok || at.Before(t) {
				first[a.by][c] = at
			}
		}
	}
	out := make(map[cid.Cid][]peer.ID)
	for p, byRoot := range first {
		if p == to {
			continue
		}
		for c, at := range byRoot {
			if mine, ok := first[to][c]; ok && at.Before(mine) && len(holders[c]) == 0 {
				out[c] = append(out[c], p)
			}
		}
	}
	for c := range out {
		slices.SortFunc(out[c], func(a, b peer.ID) int { return strings.Compare(string(a), string(b)) })
	}
	return out
}

// forgetStager drops p as a stager of job: it was refused, and staging
// before a lease stops at a refusal.
func (st *stageState) forgetStager(job string, p peer.ID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.asked, stager{job: job, by: p})
}

// stagingBy reports whether p may still be staging the job of r: it holds
// the job's lease and has not started it, or the job is still queued and
// does not avoid p (a provider the job avoids is refused the job's
// inputs, and stops).
func stagingBy(r *Record, p peer.ID) bool {
	switch r.State {
	case api.JobQueued:
		return !slices.Contains(r.Avoid, p.String())
	case api.JobRenting:
		return r.Lease != nil && r.Lease.Terms.Provider == p.String()
	}
	return false
}

func rootSources(m map[cid.Cid][]peer.ID) []wire.RootSources {
	var out []wire.RootSources
	for c, ps := range m {
		var ss []string
		for _, p := range ps[:min(len(ps), maxSources)] {
			ss = append(ss, p.String())
		}
		slices.Sort(ss)
		out = append(out, wire.RootSources{Root: c.String(), Providers: ss})
	}
	slices.SortFunc(out, func(a, b wire.RootSources) int { return strings.Compare(a.Root, b.Root) })
	return out
}

// holdersOf returns, for each root, the providers other than to that
// staged it for this node's jobs, remembering those seen now. jobs are the
// jobs in memory.
func (st *stageState) holdersOf(to peer.ID, roots []cid.Cid, jobs map[string]*jobTracker) map[cid.Cid][]peer.ID {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.holders == nil {
		st.holders = make(map[cid.Cid]map[peer.ID]time.Time)
	}
	for _, j := range jobs {
		var provider string
		var held []cid.Cid
		j.view(func(r *Record) {
			if r.Lease != nil && slices.ContainsFunc(r.Steps, func(st api.Step) bool { return st.Step == api.StepRun }) {
				provider, held = r.Lease.Terms.Provider, r.contentRoots()
			}
		})
		if provider == "" {
			continue
		}
		p, err := peer.Decode(provider)
		if err != nil {
			continue
		}
		for _, c := range held {
			if slices.Contains(roots, c) {
				if st.holders[c] == nil {
					st.holders[c] = make(map[peer.ID]time.Time)
				}
				st.holders[c][p] = now
			}
		}
	}
	out := make(map[cid.Cid][]peer.ID)
	for _, c := range roots {
		for p, at := range st.holders[c] {
			if now.Sub(at) > holdersKept {
				delete(st.holders[c], p)
				continue
			}
			if p != to && p != st.d.Self {
				out[c] = append(out[c], p)
			}
		}
		slices.Sort(out[c])
		// A few sources saturate a receiver; more only add requests.
		out[c] = out[c][:min(len(out[c]), maxSources)]
	}
	return out
}

// maxSources is how many providers are named as sources of one root.
const maxSources = 8

// relays asks each holder, in parallel, to serve its root to the requester,
// and returns the holders that agreed.
func (st *stageState) relays(ctx context.Context, to peer.ID, holders map[cid.Cid][]peer.ID) []wire.RootSources {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	type grant struct {
		root cid.Cid
		by   peer.ID
	}
	var (
		mu sync.Mutex
		ok []grant
		wg sync.WaitGroup
	)
	for c, ps := range holders {
		for _, p := range ps {
			wg.Go(func() {
				err := st.d.Calls.Call(ctx, p, wire.ProtoRelay, wire.RelayRequest{Root: c.String(), To: to.String()}, nil)
				if err != nil {
					st.log.Debug("holder will not relay", "root", c, "holder", p, "to", to, "err", err)
					if errors.Is(err, context.DeadlineExceeded) || p2p.RefusalCode(err) == wire.CodeNotHeld {
						st.forgetHolder(c, p)
					}
					return
				}
				mu.Lock()
				ok = append(ok, grant{c, p})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	byRoot := make(map[cid.Cid][]string)
	for _, g := range ok {
		byRoot[g.root] = append(byRoot[g.root], g.by.String())
	}
	var out []wire.RootSources
	for c, ps := range byRoot {
		slices.Sort(ps)
		out = append(out, wire.RootSources{Root: c.String(), Providers: ps})
	}
	slices.SortFunc(out, func(a, b wire.RootSources) int { return strings.Compare(a.Root, b.Root) })
	return out
}

func (st *stageState) forgetHolder(c cid.Cid, p peer.ID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.holders[c], p)
}
