package epochbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Mode is how peers cut an epoch's view.
type Mode struct {
	Name string
	// SignedCut cuts on signing times (view.CutTime), as nodes do now;
	// false cuts on arrival times, as nodes did before.
	SignedCut bool
	// Fixed is a fixed epoch delay; zero adapts it (view.DelayRule).
	Fixed time.Duration
}

// The modes measured: the node as it was, the signed cut alone, and the
// node as it is.
var (
	Before      = Mode{Name: "before: arrival cut, 150ms", Fixed: 150 * time.Millisecond}
	SignedFixed = Mode{Name: "signed cut, 150ms", SignedCut: true, Fixed: 150 * time.Millisecond}
	Adaptive    = Mode{Name: "after: signed cut, adaptive", SignedCut: true}
)

// Params sizes one run. Zero fields take the defaults named.
type Params struct {
	Latency    time.Duration // one-way, on every link
	Jobs       int           // default 100
	Providers  int           // default 4, each with 64 GPUs
	Submitters int           // default 2
	Epoch      time.Duration // default 1s
	// Window is the time over which the jobs are declared, at uniformly
	// random instants; default 100ms per job.
	Window time.Duration
	// Warmup lets offers, and the gossip delays they announce, spread
	// before the first job; default 3 epochs.
	Warmup time.Duration
	Mode   Mode
	Seed   uint64
}

func (p Params) withDefaults() Params {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.Jobs, 100)
	def(&p.Providers, 4)
	def(&p.Submitters, 2)
	if p.Epoch == 0 {
		p.Epoch = time.Second
	}
	if p.Window == 0 {
		p.Window = time.Duration(p.Jobs) * 100 * time.Millisecond
	}
	if p.Warmup == 0 {
		p.Warmup = 3 * p.Epoch
	}
	return p
}

// Result is what one run measured.
type Result struct {
	Latency time.Duration
	Mode    string
	Jobs    int
	// Claimed counts jobs some provider claimed before the run ended.
	Claimed int
	// Lost counts lost rounds (see the package doc).
	Lost int
	// Doubles counts claims beyond the first on a job in one epoch: a
	// proposal the submitter would decline.
	Doubles int
	// MeanDelay and MaxDelay are the epoch delays the providers cut with,
	// over the epochs with jobs.
	MeanDelay, MaxDelay time.Duration
	// DelaySplits counts epochs in which the peers did not all derive the
	// same delay.
	DelaySplits int
}

// heartbeat is how often providers re-publish their offers: often, so that
// the announced gossip delay follows the window closely.
const heartbeat = 250 * time.Millisecond

// gpusPerProvider keeps capacity beyond the jobs, so that only views, not
// room, decide whether a job is matched.
const gpusPerProvider = 64

// Run measures one configuration on fresh peers.
func Run(ctx context.Context, p Params) (Result, error) {
	p = p.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder()
	var peers []*simPeer
	defer func() {
		for _, sp := range peers {
			sp.host.Close()
		}
	}()
	for i := range p.Providers + p.Submitters {
		sp, err := newSimPeer(ctx, i < p.Providers, p, rec)
		if err != nil {
			return Result{}, err
		}
		peers = append(peers, sp)
	}
	// Every pair of peers is joined by one connection through its own
	// delay line, dialled by the lower-numbered peer.
	for j, to := range peers {
		tcp, err := tcpPort(to.host)
		if err != nil {
			return Result{}, err
		}
		for _, from := range peers[:j] {
			line, err := newDelayLine(ctx, fmt.Sprintf("127.0.0.1:%d", tcp), p.Latency)
			if err != nil {
				return Result{}, fmt.Errorf("delay line: %w", err)
			}
			defer line.Close()
			addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", line.Port()))
			if err != nil {
				return Result{}, err
			}
			if err := from.host.Connect(ctx, peer.AddrInfo{ID: to.id, Addrs: []ma.Multiaddr{addr}}); err != nil {
				return Result{}, fmt.Errorf("connect peers: %w", err)
			}
		}
	}
	if err := waitMesh(ctx, peers); err != nil {
		return Result{}, err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, sp := range peers {
		wg.Go(func() { sp.receiveOffers(ctx) })
		wg.Go(func() { sp.receiveJobs(ctx) })
		wg.Go(func() { sp.matchLoop(ctx) })
		if sp.provider {
			wg.Go(func() { sp.publishOffers(ctx) })
		}
	}
	if err := sleep(ctx, p.Warmup); err != nil {
		return Result{}, err
	}

	// Declare the jobs at random instants of the window, round-robin over
	// the submitters.
	rng := rand.New(rand.NewPCG(p.Seed, 31))
	at := make([]time.Duration, p.Jobs)
	for i := range at {
		at[i] = time.Duration(rng.Int64N(int64(p.Window)))
	}
	slices.Sort(at)
	begin := time.Now()
	for i, d := range at {
		if err := sleep(ctx, time.Until(begin.Add(d))); err != nil {
			return Result{}, err
		}
		sub := peers[p.Providers+i%p.Submitters]
		if err := sub.declare(ctx, i); err != nil {
			return Result{}, err
		}
	}
	// Let the last jobs be matched: a few epochs, or until every job is
	// claimed.
	deadline := time.Now().Add(4 * p.Epoch)
	for rec.claimedJobs() < p.Jobs && time.Now().Before(deadline) {
		if err := sleep(ctx, p.Epoch/4); err != nil {
			return Result{}, err
		}
	}
	cancel()
	wg.Wait()
	res := rec.result(peers[:p.Providers], peers[p.Providers:])
	res.Latency, res.Mode, res.Jobs = p.Latency, p.Mode.Name, p.Jobs
	return res, nil
}

// tcpPort is the loopback TCP port a host listens on.
func tcpPort(h host.Host) (int, error) {
	for _, a := range h.Addrs() {
		if v, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("host listens on no TCP port")
}

// waitMesh waits until every peer sees every other on both topics, so that
// no message of the run is lost to a mesh still forming.
func waitMesh(ctx context.Context, peers []*simPeer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ready := true
		for _, sp := range peers {
			for _, topic := range []string{p2p.TopicOffers, p2p.TopicJobs} {
				if len(sp.gossip.TopicPeers(topic)) < len(peers)-1 {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return errors.New("gossip mesh did not form within 30s")
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// simPeer is the part of a node that decides what it sees and matches.
type simPeer struct {
	// Immutable after newSimPeer.
	id       peer.ID
	host     host.Host
	provider bool
	gpus     []market.GPU
	gossip   *p2p.Gossip
	// Subscribed in newSimPeer, so that the mesh forms before the run.
	offersSub, jobsSub *p2p.Subscription
	offers             *view.Offers
	market             *view.Market
	delays             *view.GossipDelays
	rule               view.DelayRule
	p                  Params
	rec                *recorder
}

func newSimPeer(ctx context.Context, provider bool, p Params, rec *recorder) (*simPeer, error) {
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
		return nil, err
	}
	jobsSub, err := g.Subscribe(p2p.TopicJobs)
	if err != nil {
		return nil, err
	}
	sp := &simPeer{
		id: h.ID(), host: h, provider: provider, gossip: g, p: p, rec: rec, offersSub: offersSub, jobsSub: jobsSub,
		offers: view.NewOffers(), market: view.NewMarket(),
		delays: view.NewGossipDelays(view.DefaultDelayWindow),
		rule:   view.DelayRule{Epoch: p.Epoch, Floor: view.DefaultDelayFloor, Fallback: 150 * time.Millisecond},
	}
	if provider {
		for k := range gpusPerProvider {
			sp.gpus = append(sp.gpus, market.GPU{Index: k, UUID: fmt.Sprintf("GPU-%s-%02d", h.ID().ShortString(), k), Model: "H100", MemoryBytes: 80 << 30, Free: true})
		}
	}
	return sp, nil
}

func (sp *simPeer) publishOffers(ctx context.Context) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		b := wire.OfferBody{
			Offer:       market.Offer{Provider: sp.id.String(), GPUs: sp.gpus, CPUs: 4 * gpusPerProvider, MemoryBytes: 1 << 40},
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
		}
	}
}

// cut is the time the view records a message at: its cut time, or its
// arrival as nodes recorded it before.
func (sp *simPeer) cut(s p2p.Signed, now time.Time) time.Time {
	if sp.p.Mode.SignedCut {
		return view.CutTime(s.Time(), now)
	}
	return now
}

func (sp *simPeer) receiveOffers(ctx context.Context) {
	sub := sp.offersSub
	defer sub.Cancel()
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		if s.Signer != sp.id {
			sp.delays.Observe(s.Time(), now)
		}
		var b wire.OfferBody
		if s.Decode(&b) != nil {
			continue
		}
		signedAt := s.Message.Time
		if !sp.p.Mode.SignedCut {
			signedAt = now.UnixMilli() // the arrival cut, for offers too
		}
		sp.offers.Apply(b, signedAt, now)
	}
}

func (sp *simPeer) receiveJobs(ctx context.Context) {
	sub := sp.jobsSub
	defer sub.Cancel()
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		if s.Signer != sp.id {
			sp.delays.Observe(s.Time(), now)
		}
		cut := sp.cut(s, now)
		switch s.Message.Kind {
		case wire.KindDeclaration:
			var b wire.DeclarationBody
			if s.Decode(&b) == nil {
				sp.market.AddJob(&view.OpenJob{ID: wire.JobID(s), Submitter: s.Signer, Body: b, Raw: s.Raw, Seen: now, Signed: cut})
			}
		case wire.KindLease:
			var l wire.SignedLease
			if s.Decode(&l) == nil {
				sp.market.AddLease(l, cut)
			}
		}
	}
}

func (sp *simPeer) declare(ctx context.Context, i int) error {
	d := market.NewDeclaration(fmt.Sprintf("job-%d", i), []string{"true"}, 1, market.Hour, nil)
	d.Request.CPUs = 1
	d.Request.Memory = market.Size(1 << 30)
	s, err := sp.gossip.Publish(ctx, p2p.TopicJobs, wire.KindDeclaration, wire.DeclarationBody{Declaration: d})
	if err != nil {
		return fmt.Errorf("declare job %d: %w", i, err)
	}
	sp.rec.declared(wire.JobID(s), sp.id.String())
	return nil
}

// matchLoop is node.matchLoop with the node's actions replaced by records
// and, for a provider, a lease announcement per claim.
func (sp *simPeer) matchLoop(ctx context.Context) {
	e := sp.p.Epoch.Milliseconds()
	for {
		next := time.UnixMilli((time.Now().UnixMilli()/e + 1) * e)
		if sleep(ctx, time.Until(next)) != nil {
			return
		}
		epoch := uint64(next.UnixMilli() / e)
		delay := sp.p.Mode.Fixed
		if delay == 0 {
			delay = sp.rule.Delay(sp.offers.At(sp.rule.AnnouncementCut(next)))
		}
		v := sp.market.Snapshot(epoch, next, next.Add(-delay), sp.offers.At(next.Add(-delay)))
		res := market.Match(v, market.Options{})
		var claims []string
		if sp.provider {
			for _, a := range res.Assignments {
				if a.Provider != sp.id.String() {
					continue
				}
				if _, open := sp.market.Job(a.Job); !open {
					continue // leased since the cutoff: no proposal
				}
				sp.claim(ctx, a, epoch, res.ViewHash)
				claims = append(claims, a.Job)
			}
		}
		sp.rec.matched(epoch, sp.id.String(), len(v.Jobs), delay, res.Assignments, claims)
	}
}

func (sp *simPeer) claim(ctx context.Context, a market.Assignment, epoch uint64, viewHash string) {
	sub, ok := sp.market.SubmitterOf(a.Job)
	if !ok {
		return
	}
	now := time.Now().UnixMilli()
	t := wire.LeaseTerms{
		Job: a.Job, Provider: sp.id.String(), Submitter: sub.String(), GPUs: a.GPUs, CPUs: 1, MemoryBytes: 1 << 30,
		Limit: market.Hour, Proposed: now, Expires: now + 10_000, Epoch: epoch, ViewHash: viewHash, Rank: a.Rank,
	}
	t.ID = wire.LeaseID(t.Job, t.Provider, t.Proposed, 0)
	if _, err := sp.gossip.Publish(ctx, p2p.TopicJobs, wire.KindLease, wire.SignedLease{Terms: t}); err != nil {
		return
	}
}
