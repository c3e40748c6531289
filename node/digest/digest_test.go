package digest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

func parties(t *testing.T, n int) ([]wiretest.Party, []peer.ID) {
	t.Helper()
	var ps []wiretest.Party
	var ids []peer.ID
	for i := range n {
		p := wiretest.SeededParty(t, byte(10+i))
		ps = append(ps, p)
		ids = append(ids, p.ID)
	}
	return ps, ids
}

// Every peer derives the same order from the same members, whatever
// order it holds them in, and a new round draws another.
func TestOrderIsTheSameOnEveryPeer(t *testing.T) {
	_, ids := parties(t, 8)
	want := Order(42, ids)
	if len(want) != len(ids) {
		t.Fatalf("order of %d members has %d", len(ids), len(want))
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if got := Order(42, append(rev, ids[3])); !slices.Equal(got, want) {
		t.Fatalf("another peer's order %v, want %v", got, want)
	}
	differs := false
	for r := int64(43); r < 53; r++ {
		differs = differs || Order(r, ids)[0] != want[0]
	}
	if !differs {
		t.Fatal("the same member first in eleven rounds")
	}
}

func turnAt(ids []peer.ID, self int, now time.Time) Turn {
	return Turn{Self: ids[self], Members: ids, Now: now, Since: now.Add(-time.Hour)}
}

func TestDecide(t *testing.T) {
	tm := Timing{Every: time.Minute}
	_, ids := parties(t, 5)
	now := time.Unix(1_800_000_000, 0)
	order := Order(Round(now, time.Minute), ids)
	pos := func(id peer.ID) int { return slices.Index(ids, id) }
	first, second, third := pos(order[0]), pos(order[1]), pos(order[2])

	if ok, why := tm.Decide(turnAt(ids, first, now)); !ok || why != WhyFirst {
		t.Fatalf("first with no digest held: %v %q, want to publish", ok, why)
	}
	if ok, _ := tm.Decide(turnAt(ids, third, now)); ok {
		t.Fatal("the third member published")
	}
	last := &Entry{Body: wire.DigestBody{Providers: 5, FreeBoxes: []int{0, 5}}, Arrived: now.Add(-30 * time.Second)}
	fresh := last.Body
	for _, c := range []struct {
		name    string
		self    int
		ago     time.Duration
		fresh   wire.DigestBody
		publish bool
		why     string
	}{
		{"first, digest half a round old", first, 30 * time.Second, fresh, false, ""},
		{"first, digest a round old", first, time.Minute, fresh, true, WhyFirst},
		{"first, providers moved 20%", first, 30 * time.Second, wire.DigestBody{Providers: 6, FreeBoxes: []int{0, 6}}, true, WhyChange},
		{"first, moved but within MinGap", first, 5 * time.Second, wire.DigestBody{Providers: 6, FreeBoxes: []int{0, 6}}, false, ""},
		{"first, one GPU of five fewer free", first, 30 * time.Second, wire.DigestBody{Providers: 5, FreeBoxes: []int{1, 4}}, true, WhyChange},
		{"second, first heard 60s ago", second, time.Minute, fresh, false, ""},
		{"second, shard silent 90s", second, 90 * time.Second, fresh, true, WhySuccessor},
		{"third, shard silent 5m", third, 5 * time.Minute, fresh, false, ""},
	} {
		tu := turnAt(ids, c.self, now)
		l := *last
		l.Arrived = now.Add(-c.ago)
		tu.Last, tu.Fresh = &l, c.fresh
		if ok, why := tm.Decide(tu); ok != c.publish || why != c.why {
			t.Errorf("%s: got %v %q, want %v %q", c.name, ok, why, c.publish, c.why)
		}
	}
	// A successor that has just started counts the silence from its start.
	tu := turnAt(ids, second, now)
	tu.Since = now.Add(-time.Minute)
	if ok, _ := tm.Decide(tu); ok {
		t.Fatal("a successor that heard the topic for a minute published")
	}
	// A peer that is no member never publishes.
	tu = Turn{Self: wiretest.SeededParty(t, 99).ID, Members: ids, Now: now, Since: now.Add(-time.Hour)}
	if ok, _ := tm.Decide(tu); ok {
		t.Fatal("a non-member published")
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func digestBy(t *testing.T, p wiretest.Party, shard p2p.Shard) p2p.Signed {
	t.Helper()
	return wiretest.OnWire(t, p, wire.KindDigest, wire.DigestBody{Shard: wire.DigestShard(p.ID, shard), Providers: 3, FreeBoxes: []int{1, 2}})
}

func TestBookRefusesNonMembersAndFloods(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	b := NewBook(Timing{Every: time.Minute}, c.now)
	ps, _ := parties(t, 2)
	s := digestBy(t, ps[0], p2p.Shard{Count: 4})
	if err := b.Validate(s); err != nil {
		t.Fatalf("a member's digest: %v", err)
	}
	mine := wire.DigestShard(ps[0].ID, p2p.Shard{Count: 4})
	other := wire.DigestShard(ps[1].ID, p2p.Shard{Count: 4})
	other.Index = (other.Index + 1) % 4
	forged := wiretest.OnWire(t, ps[1], wire.KindDigest, wire.DigestBody{Shard: other, Providers: 1, FreeBoxes: []int{1}})
	if err := b.Validate(forged); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("a non-member's digest: got %v, want forged", err)
	}
	c.t = c.t.Add(5 * time.Second)
	if err := b.Validate(digestBy(t, ps[0], p2p.Shard{Count: 4})); !errors.Is(err, p2p.ErrUnwanted) {
		t.Fatalf("a second digest of the shard 5s later: got %v, want unwanted", err)
	}
	c.t = c.t.Add(10 * time.Second)
	if err := b.Validate(digestBy(t, ps[0], p2p.Shard{Count: 4})); err != nil {
		t.Fatalf("a digest 15s after the last: %v", err)
	}
	if e, ok := b.Last(mine); !ok || e.Publisher != ps[0].ID || !e.Arrived.Equal(c.t) {
		t.Fatalf("latest of %s: %+v %v", mine, e, ok)
	}
	c.t = c.t.Add(5 * time.Minute)
	if _, ok := b.Last(mine); ok {
		t.Fatal("a digest 5 minutes old still held")
	}
	if got := b.All(); len(got) != 0 {
		t.Fatalf("All holds %d expired digests", len(got))
	}
}

func TestBookIsBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	b := NewBook(Timing{Every: time.Minute}, c.now)
	b.max = 3
	ps, _ := parties(t, 1)
	for _, n := range []int{1, 2, 4, 8, 16} {
		c.t = c.t.Add(time.Second)
		if err := b.Validate(digestBy(t, ps[0], p2p.Shard{Count: n})); err != nil {
			t.Fatal(err)
		}
	}
	got := b.All()
	if len(got) != 3 || got[0].Body.Shard.Count != 4 {
		t.Fatalf("book of 3 holds %d digests, first of count %d; want the newest 3", len(got), got[0].Body.Shard.Count)
	}
}

func TestBuild(t *testing.T) {
	gpu := func(uuid string, free bool) market.GPU { return market.GPU{UUID: uuid, Model: "H100", Free: free} }
	held := market.Datum{Root: "bafy-big", Size: 10 << 30}
	v := market.View{
		Now: 100_000,
		Offers: []market.Offer{
			{Provider: "a", GPUs: []market.GPU{gpu("a0", true), gpu("a1", true)}, Holdings: market.Holdings{Roots: []market.Datum{held}}},
			{Provider: "b", GPUs: []market.GPU{gpu("b0", true), gpu("b1", false)}, Holdings: market.Holdings{Roots: []market.Datum{held, {Root: "bafy-small", Size: 1}}}},
			{Provider: "c", GPUs: []market.GPU{gpu("c0", true)}, Draining: true},
			{Provider: "d", GPUs: []market.GPU{gpu("d0", true)}, Unreachable: true},
		},
		Leases: []market.Lease{{Provider: "a", GPUs: []string{"a1"}}},
		Jobs: []market.Job{
			{ID: "j1", SubmittedAt: 40_000, Request: market.Request{GPUs: 2}},
			{ID: "j2", SubmittedAt: 90_000, Request: market.Request{GPUs: 1, Nodes: 3}},
		},
	}
	b := Build(p2p.Shard{}, v)
	if b.Shard.Count != 1 || b.Providers != 2 || !slices.Equal(b.FreeBoxes, []int{0, 2}) {
		t.Fatalf("shard %v, %d providers, free boxes %v; want 1/1, 2, [0 2]", b.Shard, b.Providers, b.FreeBoxes)
	}
	if b.Queued != 2 || b.QueuedGPUs != 5 || b.OldestWaitMs != 60_000 {
		t.Fatalf("queued %d, %d GPUs, oldest %dms; want 2, 5, 60000", b.Queued, b.QueuedGPUs, b.OldestWaitMs)
	}
	if len(b.Held) != 2 || b.Held[0].Root != "bafy-big" || b.Held[0].Holders != 2 {
		t.Fatalf("held %+v; want bafy-big first, held by 2", b.Held)
	}
}

// digestAt is ps's digest of the whole network's shard, signed at at.
func digestAt(t *testing.T, p wiretest.Party, at time.Time) p2p.Signed {
	t.Helper()
	s, err := p2p.Seal(p.SK, wire.KindDigest, wire.DigestBody{Shard: p2p.Shard{Count: 1}, Providers: 3, FreeBoxes: []int{1, 2}}, at)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p2p.Open(s.Raw)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A member that publishes before the round's elected publisher is
// replaced by it at once, and cannot take the shard back within the
// round; a later-ranked digest is taken once the held one is Every old.
func TestBookKeepsTheBestRankedSigner(t *testing.T) {
	const every = time.Minute
	start := time.UnixMilli(Round(time.Unix(1_800_000_000, 0), every) * every.Milliseconds())
	c := &clock{t: start.Add(5 * time.Second)}
	b := NewBook(Timing{Every: every}, c.now)
	ps, ids := parties(t, 3)
	byID := map[peer.ID]wiretest.Party{}
	for _, p := range ps {
		byID[p.ID] = p
	}
	order := Order(Round(start, every), ids)
	first, second, last := byID[order[0]], byID[order[1]], byID[order[2]]
	whole := p2p.Shard{Count: 1}
	held := func() peer.ID {
		t.Helper()
		e, ok := b.Last(whole)
		if !ok {
			t.Fatal("no digest held")
		}
		return e.Publisher
	}
	validate := func(p wiretest.Party, signed time.Time) error { return b.Validate(digestAt(t, p, signed)) }

	if err := validate(last, c.t); err != nil {
		t.Fatalf("the round's first digest, by its last member: %v", err)
	}
	c.t = c.t.Add(time.Second)
	if err := validate(first, c.t); err != nil {
		t.Fatalf("the round's first member 1s after its last (MinGap %v): %v", Timing{Every: every}.MinGap(), err)
	}
	if held() != first.ID {
		t.Fatalf("held the digest of %s, want the round's first %s", held(), first.ID)
	}
	heldAt := c.t
	for _, p := range []wiretest.Party{second, last} {
		c.t = heldAt.Add(20 * time.Second)
		if err := validate(p, c.t); !errors.Is(err, p2p.ErrUnwanted) {
			t.Fatalf("a later-ranked member 20s after the first's digest: got %v, want unwanted", err)
		}
	}
	c.t = heldAt.Add(2 * time.Second)
	if err := validate(first, c.t); !errors.Is(err, p2p.ErrUnwanted) {
		t.Fatalf("the first's repeat 2s later: got %v, want unwanted", err)
	}
	if held() != first.ID {
		t.Fatalf("held %s after refusals, want %s", held(), first.ID)
	}
	// The successor's digest of the same round, the first's one Every
	// old (clocks apart: it is still of the round by its signing time).
	signed := start.Add(30 * time.Second)
	c.t = heldAt.Add(every - time.Millisecond)
	if err := validate(second, signed); !errors.Is(err, p2p.ErrUnwanted) {
		t.Fatalf("the second under Every after the first: got %v, want unwanted", err)
	}
	c.t = heldAt.Add(every)
	if err := validate(second, signed); err != nil {
		t.Fatalf("the second once the first's digest is Every old: %v", err)
	}
	if held() != second.ID {
		t.Fatalf("held %s, want the second %s", held(), second.ID)
	}
	// An earlier round is refused; a later one comes MinGap after the
	// last, whoever signs it.
	secondAt := c.t
	c.t = secondAt.Add(20 * time.Second)
	if err := validate(first, start.Add(-time.Second)); !errors.Is(err, p2p.ErrUnwanted) {
		t.Fatalf("a digest of the round before: got %v, want unwanted", err)
	}
	next := start.Add(every)
	nextOrder := Order(Round(next, every), ids)
	other := byID[nextOrder[0]]
	if other.ID == second.ID {
		other = byID[nextOrder[1]]
	}
	c.t = secondAt.Add(5 * time.Second)
	if err := validate(other, next); !errors.Is(err, p2p.ErrUnwanted) {
		t.Fatalf("the next round's digest 5s after the last: got %v, want unwanted", err)
	}
	c.t = secondAt.Add(20 * time.Second)
	if err := validate(other, next); err != nil {
		t.Fatalf("the next round's digest 20s after the last: %v", err)
	}
	if held() != other.ID {
		t.Fatalf("held %s, want the next round's %s", held(), other.ID)
	}
}

// The first in the round's order publishes at once over a digest of its
// round by a member ranked after it, and not over one of an earlier round.
func TestDecideOutranks(t *testing.T) {
	tm := Timing{Every: time.Minute}
	_, ids := parties(t, 4)
	now := time.Unix(1_800_000_000, 0).Add(30 * time.Second) // mid-round
	order := Order(Round(now, time.Minute), ids)
	first := slices.Index(ids, order[0])
	body := wire.DigestBody{Providers: 4, FreeBoxes: []int{0, 4}}
	tu := turnAt(ids, first, now)
	tu.Fresh = body
	tu.Last = &Entry{Body: body, Publisher: order[3], SignedAt: now.Add(-time.Second), Arrived: now.Add(-time.Second)}
	if ok, why := tm.Decide(tu); !ok || why != WhyOutrank {
		t.Fatalf("first, the round's digest by the last member: %v %q, want to publish (%s)", ok, why, WhyOutrank)
	}
	tu.Last.SignedAt = now.Add(-time.Minute)
	if ok, why := tm.Decide(tu); ok {
		t.Fatalf("first, the last member's digest of the round before, 1s ago: published (%s)", why)
	}
	second := slices.Index(ids, order[1])
	tu = turnAt(ids, second, now)
	tu.Fresh = body
	tu.Last = &Entry{Body: body, Publisher: order[3], SignedAt: now.Add(-time.Second), Arrived: now.Add(-time.Second)}
	if ok, why := tm.Decide(tu); ok {
		t.Fatalf("second, the round's digest by the last member 1s ago: published (%s)", why)
	}
}
