package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Staging from many sources.
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
// when it is the only source. Staging before the lease is in prestage.go.

// sourcing is the provider's state for staging from many sources, and
// before the lease (prestage.go).
type sourcing struct {
	*env // immutable, shared with the role
	// inputs are the role's layouts: a fetch before the lease lays out
	// what it fetched.
	inputs *layouts

	// mu guards the maps below. A state lock: never held across I/O or a
	// call into another part (the view's open jobs are asked before it is
	// taken); only a fetch's goroutine is started under it (tasks.Go).
	mu sync.Mutex
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
func (s *sourcing) fetchStaged(ctx context.Context, job, lease string, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	unlock, err := s.lockRoot(ctx, root)
	if err != nil {
		return content.FetchStats{}, err
	}
	defer unlock()
	if err := s.awaitDataPath(ctx, from, root); err != nil {
		return content.FetchStats{}, err
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
	if from != s.d.Self && !s.stagedWhole(root) && (!s.cfg.SingleSource || lease == "") {
		more, err := s.awaitSources(ctx, job, lease, from, root)
		if err != nil {
			if lease == "" {
				// Not allowed before the lease: nothing to fetch yet.
				return content.FetchStats{}, err
			}
			s.log.Info("staging from the submitter alone", "job", job, "err", err)
		}
		if !s.cfg.SingleSource {
			sources = append(sources, more...)
		}
	}
	st, err := s.d.Fetcher.FetchFrom(ctx, sources, root, o)
	s.countFetched(from, st)
	if err != nil {
		return st, err
	}
	s.held(from, root)
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
func (s *sourcing) awaitSources(ctx context.Context, job, lease string, submitter peer.ID, root cid.Cid) ([]peer.ID, error) {
	deadline := time.Now().Add(holderWait)
	for {
		holders, staging, err := s.askSources(ctx, job, lease, submitter, root)
		if err != nil || len(holders) > 0 || !staging || s.cfg.SingleSource || time.Now().After(deadline) {
			return holders, err
		}
		s.log.Debug("waiting for another provider to finish staging", "job", job, "root", root)
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
func (s *sourcing) askSources(ctx context.Context, job, lease string, submitter peer.ID, root cid.Cid) (holders []peer.ID, staging bool, err error) {
	var rep wire.StageReply
	if err := s.d.Calls.Call(ctx, submitter, wire.ProtoStage, wire.StageRequest{Job: job, Lease: lease}, &rep); err != nil {
		return nil, false, fmt.Errorf("ask the submitter to stage: %w", err)
	}
	m, err := rep.Parsed()
	if err != nil {
		return nil, false, err
	}
	for _, q := range m[root] {
		if q != s.d.Self && q != submitter {
			holders = append(holders, q)
		}
	}
	st, err := rep.ParsedStaging()
	if err != nil {
		return nil, false, err
	}
	return holders, slices.ContainsFunc(st[root], func(q peer.ID) bool { return q != s.d.Self }), nil
}

func (s *sourcing) countFetched(submitter peer.ID, st content.FetchStats) {
	if s.d.Metrics == nil || s.d.Metrics.Fetched == nil {
		return
	}
	if len(st.Sources) == 0 {
		s.d.Metrics.Fetched.WithLabelValues("submitter").Add(float64(st.BytesFetched))
		return
	}
	for _, src := range st.Sources {
		kind := "provider"
		if src.Peer == submitter {
			kind = "submitter"
		}
		s.d.Metrics.Fetched.WithLabelValues(kind).Add(float64(src.Bytes))
	}
}

// fetch fetches a DAG from the submitter alone, for staging, over a path
// that carries data (awaitDataPath).
func (s *sourcing) fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	if err := s.awaitDataPath(ctx, from, root); err != nil {
		return content.FetchStats{}, err
	}
	return s.d.Fetcher.Fetch(ctx, from, root, o)
}

// awaitDataPath waits for a path to the submitter that carries data: a
// direct connection or, when no hole is punched, a circuit through a relay
// whose operator lets it carry data. A relay that limits its circuits
// carries a lease's messages but, by design, not its data: with only such
// a path it waits for a hole to be punched, then fails naming why, rather
// than stalling.
func (s *sourcing) awaitDataPath(ctx context.Context, from peer.ID, root cid.Cid) error {
	if s.d.Path == nil {
		return nil
	}
	path, err := p2p.AwaitDirect(ctx, s.d.Path, from, "the submitter", p2p.DirectWait)
	if err != nil {
		return err
	}
	if path == p2p.PathRelayedData {
		_, relay := s.d.Path(from)
		s.log.Info("staging through a relay: no direct connection to the submitter", "root", root, "submitter", from, "relay", relay)
		if s.d.Metrics.ThroughRelay != nil {
			s.d.Metrics.ThroughRelay.Inc()
		}
	}
	return nil
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
