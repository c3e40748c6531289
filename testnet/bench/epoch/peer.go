package epoch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	nodeepoch "github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// heartbeat is how often providers re-publish their offers: shorter than a
// node's default (10s), so that a run of seconds reaches the steady state
// of announced delays that a network reaches in minutes. A provider also
// re-publishes at once when its GPUs change, as a node does.
const heartbeat = time.Second

// protoPropose carries a provider's claim to the submitter, as the node's
// lease protocol does: the lease is announced only once the submitter
// accepted, a round trip after the Match.
const protoPropose = protocol.ID("/e31bench/propose/1")

// proposal is the claim a provider sends; the submitter accepts the first
// for each of its jobs and refuses the rest.
type proposal struct {
	Job   string `json:"job"`
	Epoch uint64 `json:"epoch"`
}

// errTaken refuses a proposal for a job already accepted.
var errTaken = errors.New("job already leased")

// simPeer is the part of a node that decides what it sees, matches and
// claims: the views, the delay window and rule, the provider's held GPUs and
// the submitter's acceptance of one proposal per job.
type simPeer struct {
	// Immutable after newSimPeer.
	id     peer.ID
	host   host.Host
	gossip *p2p.Gossip
	// Subscribed in newSimPeer, so that the mesh forms before the run.
	offersSub, jobsSub *p2p.Subscription
	offers             *view.Offers
	market             *view.Market
	delays             *view.GossipDelays
	rule               view.DelayRule
	p                  Params
	rec                *recorder
	changed            chan struct{} // the provider's GPUs changed: publish now

	mu       sync.Mutex // guards gpus, held and accepted
	gpus     []market.GPU
	held     map[string]string // GPU UUID → job, from proposal on
	accepted map[string]bool   // the submitter's jobs it accepted a proposal for
}

func newSimPeer(ctx context.Context, gpus int, p Params, rec *recorder) (*simPeer, error) {
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: sk, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		return nil, err
	}
	g, err := p2p.NewGossip(ctx, h, sk, p2p.GossipConfig{
		Network:    "epochbench",
		Validators: map[string]p2p.BodyValidator{p2p.TopicOffers: wire.ValidateOffer},
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	offersSub, err := g.Subscribe(p2p.TopicOffers)
	if err != nil {
		h.Close()
		return nil, err
	}
	jobsSub, err := g.Subscribe(p2p.TopicJobs)
	if err != nil {
		h.Close()
		return nil, err
	}
	sp := &simPeer{
		id: h.ID(), host: h, gossip: g, p: p, rec: rec, offersSub: offersSub, jobsSub: jobsSub,
		offers: view.NewOffers(), market: view.NewMarket(),
		delays:   view.NewGossipDelays(view.DefaultDelayWindow),
		rule:     view.DefaultDelayRule(p.Epoch),
		changed:  make(chan struct{}, 1),
		held:     make(map[string]string),
		accepted: make(map[string]bool),
	}
	for k := range gpus {
		sp.gpus = append(sp.gpus, market.GPU{Index: k, UUID: fmt.Sprintf("GPU-%s-%03d", h.ID().ShortString(), k), Model: "H100", MemoryBytes: 80 << 30, Free: true})
	}
	return sp, nil
}

func (sp *simPeer) isProvider() bool { return len(sp.gpus) > 0 }

func (sp *simPeer) publishOffers(ctx context.Context) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		sp.mu.Lock()
		gpus := make([]market.GPU, len(sp.gpus))
		for i, g := range sp.gpus {
			g.Free = sp.held[g.UUID] == ""
			gpus[i] = g
		}
		sp.mu.Unlock()
		b := wire.OfferBody{
			Offer:       market.Offer{Provider: sp.id.String(), GPUs: gpus, CPUs: 4 * len(gpus), MemoryBytes: 1 << 40},
			HeartbeatMs: heartbeat.Milliseconds(),
			GossipP99Ms: sp.delays.Announced(),
		}
		if _, err := sp.gossip.Publish(ctx, p2p.TopicOffers, wire.KindOffer, b); err != nil && ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-sp.changed:
		}
	}
}

// observe records how long gossip took to bring a message from another
// peer, into the peer's own window (what it announces) and the run's record
// (what the table shows, by kind).
func (sp *simPeer) observe(s p2p.Signed, now time.Time) {
	if s.Signer == sp.id {
		return
	}
	sp.delays.Observe(s.Time(), now)
	sp.rec.sample(s.Message.Kind, now.Sub(s.Time()))
}

// stamp is how the view records a message: as nodes do now, or by its
// arrival alone as nodes did before.
func (sp *simPeer) stamp(s p2p.Signed, now time.Time) view.Stamp {
	if sp.p.Mode.signedCut() {
		return view.Stamp{Signed: s.Time(), Arrived: now}
	}
	return view.Local(now)
}

// receive hands each message of sub, once observed, to handle with the
// time it arrived, until ctx ends; then it cancels sub.
func (sp *simPeer) receive(ctx context.Context, sub *p2p.Subscription, handle func(s p2p.Signed, now time.Time)) {
	defer sub.Cancel()
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		sp.observe(s, now)
		handle(s, now)
	}
}

func (sp *simPeer) receiveOffers(ctx context.Context) {
	sp.receive(ctx, sp.offersSub, func(s p2p.Signed, now time.Time) {
		var b wire.OfferBody
		if s.Decode(&b) != nil {
			return
		}
		signedAt := s.Message.Time
		if !sp.p.Mode.signedCut() {
			signedAt = now.UnixMilli() // the arrival cut, for offers too
		}
		sp.offers.Apply(b, signedAt, now)
	})
}

func (sp *simPeer) receiveJobs(ctx context.Context) {
	sp.receive(ctx, sp.jobsSub, func(s p2p.Signed, now time.Time) {
		at := sp.stamp(s, now)
		switch s.Message.Kind {
		case wire.KindDeclaration:
			var b wire.DeclarationBody
			if s.Decode(&b) == nil {
				sp.market.AddJob(&view.OpenJob{ID: wire.JobID(s), Submitter: s.Signer, Body: b, Seen: now, Signed: at.Signed})
			}
		case wire.KindLease:
			var l wire.SignedLease
			if s.Decode(&l) == nil {
				sp.market.AddLease(l, at)
			}
		}
	})
}

func (sp *simPeer) declare(ctx context.Context, i int) error {
	d := market.NewDeclaration(fmt.Sprintf("job-%d", i), []string{"true"}, 1, market.Hour, nil)
	d.Request.CPUs = 1
	d.Request.Memory = market.Size(1 << 30)
	s, err := sp.gossip.Publish(ctx, p2p.TopicJobs, wire.KindDeclaration, wire.DeclarationBody{Declaration: d})
	if err != nil {
		return fmt.Errorf("declare job %d: %w", i, err)
	}
	sp.rec.declared(wire.JobID(s), sp.id.String(), s.Time())
	return nil
}

// matchLoop runs the node's own epoch loop (epoch.Loop) on this peer's
// views, with the node's delay rule: the same cut, the same Match, the
// same carrying out (epoch.Carry), only its Actions are the benchmark's
// (benchActions). Every cut is recorded, a view without jobs included, so
// that an epoch counts only once every peer has passed it.
func (sp *simPeer) matchLoop(ctx context.Context, wg *sync.WaitGroup) {
	self := sp.id.String()
	l := nodeepoch.Loop{
		Clock:   nodeepoch.Clock{Length: sp.p.Epoch, Fixed: sp.p.Mode.fixed(), Rule: sp.rule, Offers: sp.offers},
		Market:  sp.market,
		Self:    self,
		Actions: benchActions{sp: sp, ctx: ctx, wg: wg},
		Cut: func(e uint64, delay time.Duration, jobs int) {
			sp.rec.cut(e, self, delay, jobs)
		},
		Log: slog.New(slog.DiscardHandler),
	}
	l.Run(ctx)
}

// benchActions carry out a peer's Match as the node's would, where it
// changes who sees what when: a provider claims what its Match gave it
// (proposal, then lease announcement); every peer records what its Match
// assigned, which for a submitter's own jobs is the "waiting for a
// proposal" it would show. Waits, reservations and staging change no view
// and are left out.
type benchActions struct {
	sp  *simPeer
	ctx context.Context // the run's
	wg  *sync.WaitGroup // the run's goroutines, claims among them
}

func (benchActions) RecordWaits(market.Result)        {}
func (benchActions) RecordReservations(market.Result) {}
func (benchActions) Prestage([]market.Reservation)    {}

func (b benchActions) RecordMatch(m api.Match) {
	b.sp.rec.matched(m.Epoch, b.sp.id.String(), m.ViewHash, m.Assignments)
}

// Propose holds the assignment's GPUs, as the node's provider does, and
// claims them; an assignment on GPUs held for another job is recorded as
// busy. Carry calls it after RecordMatch, so the pass is on record.
func (b benchActions) Propose(a market.Assignment, epoch uint64, _ string) {
	sp := b.sp
	if !sp.isProvider() {
		return
	}
	switch sp.hold(a) {
	case holdOK:
		b.wg.Go(func() { sp.claim(b.ctx, a, epoch) })
	case holdBusy:
		sp.rec.busy(epoch, sp.id.String(), a.Job)
	}
}

type holdResult int

const (
	holdOK     holdResult = iota
	holdClosed            // the job is leased (or being proposed) by now
	holdBusy              // a GPU it was given is held for another job
)

// hold reserves an assignment's GPUs for a proposal, as the node's provider
// does: only for a job open now, on GPUs not held.
func (sp *simPeer) hold(a market.Assignment) holdResult {
	if _, open := sp.market.Job(a.Job); !open {
		return holdClosed
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, g := range a.GPUs {
		if j := sp.held[g]; j == a.Job {
			return holdClosed
		} else if j != "" {
			return holdBusy
		}
	}
	for _, g := range a.GPUs {
		sp.held[g] = a.Job
	}
	return holdOK
}

// claim proposes the job to its submitter and, once accepted, announces the
// lease; refused, it frees the GPUs again.
func (sp *simPeer) claim(ctx context.Context, a market.Assignment, epoch uint64) {
	release := func() {
		sp.mu.Lock()
		for _, g := range a.GPUs {
			if sp.held[g] == a.Job {
				delete(sp.held, g)
			}
		}
		sp.mu.Unlock()
	}
	sub, ok := sp.market.SubmitterOf(a.Job)
	if !ok {
		release()
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p2p.Call(cctx, sp.host, sub, protoPropose, proposal{Job: a.Job, Epoch: epoch}, nil); err != nil {
		release()
		if ctx.Err() == nil {
			sp.rec.declined(a.Job, epoch)
		}
		return
	}
	select {
	case sp.changed <- struct{}{}:
	default:
	}
	now := time.Now().UnixMilli()
	t := wire.LeaseTerms{
		Job: a.Job, Provider: sp.id.String(), Submitter: sub.String(), GPUs: a.GPUs, CPUs: 1, MemoryBytes: 1 << 30,
		Limit: market.Hour, Proposed: now, Expires: now + 10_000, Epoch: epoch, Rank: a.Rank,
	}
	t.ID = wire.LeaseID(t.Job, t.Provider, t.Proposed, 0)
	_, _ = sp.gossip.Publish(ctx, p2p.TopicJobs, wire.KindLease, wire.SignedLease{Terms: t})
}

// serveProposals answers proposals for this peer's jobs: the first is
// accepted, the rest refused.
func (sp *simPeer) serveProposals(ctx context.Context) {
	p2p.Serve(ctx, sp.host, protoPropose, 10*time.Second, slog.New(slog.DiscardHandler), func(_ context.Context, _ peer.ID, req json.RawMessage) (any, error) {
		var pr proposal
		if err := p2p.DecodeStrict(req, &pr); err != nil {
			return nil, err
		}
		sp.mu.Lock()
		taken := sp.accepted[pr.Job]
		sp.accepted[pr.Job] = true
		sp.mu.Unlock()
		if taken {
			return nil, errTaken
		}
		sp.rec.accepted(pr.Job, pr.Epoch, time.Now())
		return struct{}{}, nil
	})
}
