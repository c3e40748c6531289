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
