package node

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// relayPeers answers this node's relay service (p2p.RelayPeers) from the
// network's topics as this node hears them: a member is a peer whose
// signed message was accepted there (an offer, a declaration, a lease, a
// release...) or who is a party of an announced lease; a pair may move
// data through the relay while it holds a lease announced and not yet
// released, or while both hold parts of one gang. The gossip tells it of
// each message as its validation accepts it (p2p.GossipConfig.Accepted),
// before the message is forwarded: a newcomer's first declaration makes it
// a member, and its waiting reservation is granted, before any provider
// that learns of the job from this relay can dial it through the relay.
// It needs nothing of the view's loops, and a node that relays nothing has
// none.
type relayPeers struct {
	mu sync.Mutex // guards everything below; memory only
	// joined is closed when a peer becomes a member, then replaced.
	joined chan struct{}
	// expired is when what aged out was last forgotten.
	expired time.Time
	// seen holds each member, by when its last message arrived.
	seen map[peer.ID]time.Time
	// leases holds the live leases, by ID; released, the leases whose
	// release came before their announcement, by when it came.
	leases   map[string]relayLease
	released map[string]time.Time
	// pairs counts the live leases between two peers (pairOf).
	pairs map[[2]peer.ID]int
	// gangs holds the jobs declared as gangs, by job ID; gangParts, for
	// each gang, the providers of its live parts with how many each holds;
	// gangsOf, for each such provider, its gangs likewise.
	gangs     map[string]gangMark
	gangParts map[string]map[peer.ID]int
	gangsOf   map[peer.ID]map[string]int
}

// relayLease is a live lease as the relay sees it.
type relayLease struct {
	provider, submitter peer.ID
	gang                string // the gang it is a part of; "" for none
	until               time.Time
}

// gangMark is a job declared as a gang (request.nodes ≥ 2).
type gangMark struct {
	submitter peer.ID
	seen      time.Time
}

// Bounds on what a relay remembers. A member is forgotten a day after its
// last message; a lease is live at most leaseLiveSlack past its limit,
// should its release be lost. Past a bound, what is new is not recorded:
// a flood of fresh identities cannot push out the members already known.
const (
	memberFor       = 24 * time.Hour
	leaseLiveSlack  = 30 * time.Minute // a run's grace, its output's hand-over, clock skew
	releasedFor     = 10 * time.Minute
	maxRelayMembers = 1 << 17
	maxRelayLeases  = 1 << 18
	maxRelayGangs   = 1 << 16
)

func newRelayPeers() *relayPeers {
	return &relayPeers{
		joined:    make(chan struct{}),
		seen:      make(map[peer.ID]time.Time),
		leases:    make(map[string]relayLease),
		released:  make(map[string]time.Time),
		pairs:     make(map[[2]peer.ID]int),
		gangs:     make(map[string]gangMark),
		gangParts: make(map[string]map[peer.ID]int),
		gangsOf:   make(map[peer.ID]map[string]int),
	}
}

var _ p2p.RelayPeers = (*relayPeers)(nil)

func pairOf(a, b peer.ID) [2]peer.ID { return [2]peer.ID{min(a, b), max(a, b)} }

// Member reports whether p sent a message the network's topics accepted
// in the last day, or is a party of a lease announced there.
func (r *relayPeers) Member(p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[p]
	return ok && time.Since(at) < memberFor
}

// Paired reports whether a and b hold a live lease together, or parts of
// one gang.
func (r *relayPeers) Paired(a, b peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pairs[pairOf(a, b)] > 0 {
		return true
	}
	ga, gb := r.gangsOf[a], r.gangsOf[b]
	if len(gb) < len(ga) {
		ga, gb = gb, ga
	}
	for g := range ga {
		if gb[g] > 0 {
			return true
		}
	}
	return false
}

// Joined is closed the next time a peer becomes a member.
func (r *relayPeers) Joined() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.joined
}

// expireEvery is how often apply forgets what aged out.
const expireEvery = time.Minute

// accepted is the gossip's hook (p2p.GossipConfig.Accepted).
func (r *relayPeers) accepted(_ string, s p2p.Signed) { r.apply(s, time.Now()) }

// apply records what one accepted message says of the network's peers.
// The topic's validator checked it already: what fails to decode here is
// ignored.
func (r *relayPeers) apply(s p2p.Signed, now time.Time) {
	if r.due(now) {
		r.expire(now)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sawLocked(s.Signer, now)
	switch s.Message.Kind {
	case wire.KindDeclaration:
		r.declaredLocked(s, now)
	case wire.KindRequeue:
		var b wire.RequeueBody
		if s.Decode(&b) != nil {
			return
		}
		for _, raw := range b.Declarations {
			if d, err := p2p.Reopen(raw); err == nil && d.Signer == s.Signer {
				r.declaredLocked(d, now)
			}
		}
	case wire.KindLease:
		var l wire.SignedLease
		if s.Decode(&l) == nil {
			r.leaseLocked(l.Terms, now)
		}
	case wire.KindRelease:
		var b wire.ReleaseBody
		if s.Decode(&b) == nil {
			r.releaseLocked(b, s.Signer, now)
		}
	case wire.KindTaskBatch:
		var b wire.TaskBatchBody
		if s.Decode(&b) != nil {
			return
		}
		for _, l := range b.Leases {
			r.leaseLocked(l.Terms, now)
		}
		for _, rel := range b.Releases {
			r.releaseLocked(rel, s.Signer, now)
		}
	}
}

// due reports whether it is time to forget what aged out, and takes the
// turn.
func (r *relayPeers) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.expired) < expireEvery {
		return false
	}
	r.expired = now
	return true
}

func (r *relayPeers) sawLocked(p peer.ID, now time.Time) {
	at, ok := r.seen[p]
	if !ok && len(r.seen) >= maxRelayMembers {
		return
	}
	r.seen[p] = now
	if !ok || now.Sub(at) >= memberFor {
		close(r.joined)
		r.joined = make(chan struct{})
	}
}

// declaredLocked marks a gang's declaration, so that its parts' leases
// pair their providers.
func (r *relayPeers) declaredLocked(s p2p.Signed, now time.Time) {
	var b struct {
		Declaration struct {
			Request struct {
				Nodes int `json:"nodes"`
			} `json:"request"`
		} `json:"declaration"`
	}
	if json.Unmarshal(s.Message.Body, &b) != nil || !(market.Request{Nodes: b.Declaration.Request.Nodes}).Gang() {
		return
	}
	id := wire.JobID(s)
	if _, ok := r.gangs[id]; !ok && len(r.gangs) >= maxRelayGangs {
		return
	}
	r.gangs[id] = gangMark{submitter: s.Signer, seen: now}
}

// leaseLocked records an announced lease as live, and both its parties as
// members: each signed it.
func (r *relayPeers) leaseLocked(t wire.LeaseTerms, now time.Time) {
	prov, err1 := peer.Decode(t.Provider)
	sub, err2 := peer.Decode(t.Submitter)
	if err1 != nil || err2 != nil {
		return
	}
	r.sawLocked(prov, now)
	r.sawLocked(sub, now)
	if _, ok := r.leases[t.ID]; ok {
		return
	}
	if _, ok := r.released[t.ID]; ok {
		return // released before its announcement arrived
	}
	until := time.UnixMilli(t.Proposed).Add(time.Duration(t.Limit)*time.Millisecond + leaseLiveSlack)
	if !now.Before(until) || len(r.leases) >= maxRelayLeases {
		return
	}
	l := relayLease{provider: prov, submitter: sub, until: until}
	if g, _, ok := market.SplitTaskID(t.Job); ok && r.gangs[g].submitter == sub {
		l.gang = g
	}
	r.leases[t.ID] = l
	r.pairs[pairOf(prov, sub)]++
	if l.gang == "" {
		return
	}
	if r.gangParts[l.gang] == nil {
		r.gangParts[l.gang] = make(map[peer.ID]int)
	}
	r.gangParts[l.gang][prov]++
	if r.gangsOf[prov] == nil {
		r.gangsOf[prov] = make(map[string]int)
	}
	r.gangsOf[prov][l.gang]++
}

// releaseLocked ends a lease's life, on its provider's or submitter's word.
func (r *relayPeers) releaseLocked(b wire.ReleaseBody, by peer.ID, now time.Time) {
	l, ok := r.leases[b.Lease]
	if !ok {
		if by.String() == b.Provider || by.String() == b.Submitter {
			r.released[b.Lease] = now
		}
		return
	}
	if by != l.provider && by != l.submitter {
		return
	}
	r.dropLocked(b.Lease, l)
}

func (r *relayPeers) dropLocked(id string, l relayLease) {
	delete(r.leases, id)
	k := pairOf(l.provider, l.submitter)
	if r.pairs[k]--; r.pairs[k] <= 0 {
		delete(r.pairs, k)
	}
	if l.gang == "" {
		return
	}
	if parts := r.gangParts[l.gang]; parts != nil {
		if parts[l.provider]--; parts[l.provider] <= 0 {
			delete(parts, l.provider)
		}
		if len(parts) == 0 {
			delete(r.gangParts, l.gang)
		}
	}
	if of := r.gangsOf[l.provider]; of != nil {
		if of[l.gang]--; of[l.gang] <= 0 {
			delete(of, l.gang)
		}
		if len(of) == 0 {
			delete(r.gangsOf, l.provider)
		}
	}
}

// expire forgets the members, gangs and early releases past their time,
// and ends the leases whose release never came.
func (r *relayPeers) expire(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, at := range r.seen {
		if now.Sub(at) >= memberFor {
			delete(r.seen, p)
		}
	}
	for id, at := range r.released {
		if now.Sub(at) >= releasedFor {
			delete(r.released, id)
		}
	}
	for id, l := range r.leases {
		if !now.Before(l.until) {
			r.dropLocked(id, l)
		}
	}
	for id, g := range r.gangs {
		if now.Sub(g.seen) >= memberFor && len(r.gangParts[id]) == 0 {
			delete(r.gangs, id)
		}
	}
}

// relayBudget is a relay byte budget as Config sets it: 0 the default,
// negative none (0 to p2p).
func relayBudget(set, def int64) int64 {
	switch {
	case set == 0:
		return def
	case set < 0:
		return 0
	}
	return set
}

// hook is the gossip's hook that feeds the relay's view of the network;
// nil on a node that relays nothing (r is nil).
func (r *relayPeers) hook() func(string, p2p.Signed) {
	if r == nil {
		return nil
	}
	return r.accepted
}
