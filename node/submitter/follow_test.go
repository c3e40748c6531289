package submitter

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/poll"
)

// memFollower follows markets in memory: each followed market publishes
// to a memGossip of its own and answers with fixed offers and placement.
type memFollower struct {
	mu      sync.Mutex
	markets map[p2p.Shard]*memFollowed
	offers  Offers
	assigns bool
}

type memFollowed struct {
	*memGossip
	f *memFollower
}

func (m memFollowed) Offers() Offers       { return m.f.offers }
func (m memFollowed) Placement() Placement { return fixedPlacement(m.f.assigns) }

type fixedPlacement bool

func (p fixedPlacement) Assigns(string, string, time.Time) bool { return bool(p) }

func (f *memFollower) Follow(_ context.Context, m p2p.Shard) (Followed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.markets == nil {
		f.markets = map[p2p.Shard]*memFollowed{}
	}
	if _, ok := f.markets[m]; !ok {
		f.markets[m] = &memFollowed{memGossip: &memGossip{}, f: f}
	}
	return f.markets[m], nil
}

func (f *memFollower) Followed(m p2p.Shard) (Followed, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.markets[m]
	return g, ok
}

func (f *memFollower) gossip(m p2p.Shard) *memGossip {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g, ok := f.markets[m]; ok {
		return g.memGossip
	}
	return &memGossip{}
}

// With a follower, a job is routed over every market's digest: an
// 8×H100 job from a CPU node goes to the H100x8 market, whatever this
// node's own.
func TestMarketsChooseRoutesOverEveryDigest(t *testing.T) {
	cpu := p2p.Shard{Class: "cpu", Count: 1}
	h100 := p2p.Shard{Class: "H100x8", Index: 1, Count: 2}
	m := &Markets{Own: cpu, Follow: &memFollower{}, Draw: func(int) int { return 0 },
		Digests: fixedDigests{{Class: "cpu", Count: 1, Providers: 3}, {Class: "H100x8", Index: 1, Count: 2, Providers: 9, FreeBoxes: []int{0, 0, 0, 0, 0, 0, 0, 0, 9}}}}
	got, err := m.choose(market.Request{GPUs: 8, GPUModel: "H100"}, nil)
	if err != nil || got != h100 {
		t.Fatalf("an 8×H100 job from a CPU node: %v, %v; want %v", got, err, h100)
	}
	m.Digests = fixedDigests{{Class: "cpu", Count: 1, Providers: 3}}
	if _, err := m.choose(market.Request{GPUs: 8, GPUModel: "H100"}, nil); err == nil || !strings.Contains(err.Error(), "no other market's digest") {
		t.Fatalf("a job no digest fits: %v; want a refusal saying no digest shows a fit", err)
	}
}

// A job declared in a market this node does not take part in is
// followed there: its declaration, withdrawal and re-announcements go to
// that market's jobs topic, never the node's own, and it counts among the
// markets to follow until it ends.
func TestJobOfAnotherMarketPublishesThere(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	cpu := p2p.Shard{Class: "cpu", Count: 1}
	h100 := p2p.Shard{Class: "H100x8", Count: 1}
	f := &memFollower{}
	h.s.d.Markets = &Markets{Own: cpu, Follow: f, Draw: func(int) int { return 0 },
		Digests: fixedDigests{{Class: "H100x8", Count: 1, Providers: 2, FreeBoxes: []int{0, 0, 0, 0, 0, 0, 0, 0, 2}}}}
	d := market.NewDeclaration("t", []string{"true"}, 8, market.Hour, nil)
	d.Request.GPUModel = "H100"
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec := h.s.jobs.get(j.ID).snapshot(); rec.Market == nil || *rec.Market != h100 {
		t.Fatalf("the record names market %v, want %v", rec.Market, h100)
	}
	there := f.gossip(h100)
	if there.rawCount() != 1 || h.gossip.rawCount() != 0 {
		t.Fatalf("declaration announced %d times in the H100 market, %d in the node's own; want 1 and 0", there.rawCount(), h.gossip.rawCount())
	}
	if ms := h.s.Markets(); len(ms) != 1 || ms[0] != (OpenMarket{Shard: h100, Placing: true}) {
		t.Fatalf("markets to follow: %v, want [%v]", ms, h100)
	}

	// The re-announcement goes there too.
	h.s.cfg.RequeueEvery = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.s.requeueLoop(ctx) }()
	poll.Until(t, "a re-announcement", 10*time.Second, func() bool { return there.count(wire.KindRequeue) > 0 })
	cancel()
	<-done
	if there.count(wire.KindRequeue) == 0 || h.gossip.count(wire.KindRequeue) != 0 {
		t.Fatalf("re-announced %d times in the H100 market, %d in the node's own; want some and 0", there.count(wire.KindRequeue), h.gossip.count(wire.KindRequeue))
	}

	if _, err := h.s.Withdraw(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	if there.count(wire.KindWithdrawal) != 1 || h.gossip.count(wire.KindWithdrawal) != 0 {
		t.Fatalf("withdrawal announced %d times in the H100 market, %d in the node's own; want 1 and 0", there.count(wire.KindWithdrawal), h.gossip.count(wire.KindWithdrawal))
	}
	if ms := h.s.Markets(); len(ms) != 0 {
		t.Fatalf("markets to follow after the job ended: %v, want none", ms)
	}
}

// A proposal for a job of a followed market is judged on that market's
// offers and Match; one for a market no longer followed is refused.
func TestClaimsOfAFollowedMarket(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	h100 := p2p.Shard{Class: "H100x8", Count: 1}
	f := &memFollower{offers: noOffers{}}
	h.s.d.Markets = &Markets{Own: p2p.Shard{Class: "cpu", Count: 1}, Follow: f}
	j := newJobTracker(&h.s.parts, &Record{ID: "job", Market: &h100, State: api.JobQueued})
	prov := h.prov.ID.String()
	now := time.Now()
	if _, _, ok := h.s.judgedIn(&h100); ok {
		t.Fatal("a market not followed judged proposals")
	}
	if h.s.claims.assignedTo(j, prov, now) {
		t.Fatal("a job of a market not followed counted as assigned")
	}
	if _, err := f.Follow(context.Background(), h100); err != nil {
		t.Fatal(err)
	}
	if h.s.claims.assignedTo(j, prov, now) {
		t.Fatal("assigned where the followed market's Match does not assign")
	}
	f.assigns = true
	if !h.s.claims.assignedTo(j, prov, now) {
		t.Fatal("not assigned where the followed market's Match assigns")
	}
	f.offers = fixedOffers{prov: view.OfferEntry{LastSeen: now}}
	offers, _, ok := h.s.judgedIn(&h100)
	if _, held := offers.Get(prov); !ok || !held {
		t.Fatal("the followed market's offers are not those the claims check reads")
	}
}

type fixedOffers map[string]view.OfferEntry

func (o fixedOffers) Get(p string) (view.OfferEntry, bool) { e, ok := o[p]; return e, ok }
