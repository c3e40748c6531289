package node

import (
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

func TestMarketOf(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	book := digest.NewBook(digest.Timing{}, func() time.Time { return now })
	p := wiretest.SeededParty(t, 1)
	for _, count := range []int{4, 1} {
		shard := wire.DigestShard(p.ID, p2p.Shard{Count: count})
		s := wiretest.OnWire(t, p, wire.KindDigest, wire.DigestBody{Shard: shard, Providers: 2, FreeBoxes: []int{1, 1},
			Members: []wire.DigestMember{{ID: p.ID.String(), Addrs: []string{"/ip4/10.0.0.1/tcp/1"}}}})
		if err := book.Validate(s); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(3 * time.Second)
	m := marketOf(book, p2p.Shard{Count: 1}, now)
	if len(m.Shards) != 2 {
		t.Fatalf("%d shards, want 2", len(m.Shards))
	}
	whole, part := m.Shards[0], m.Shards[1]
	if whole.Count != 1 || !whole.Own || part.Count != 4 || part.Own {
		t.Fatalf("shards %d (own %v), %d (own %v); want 1 (own), then 4", whole.Count, whole.Own, part.Count, part.Own)
	}
	if whole.Publisher != p.ID.String() || whole.AgeMs != 3000 || whole.Providers != 2 || len(whole.Members) != 1 {
		t.Fatalf("whole network's shard: %+v", whole)
	}
}

func TestLastViewHash(t *testing.T) {
	h := []api.Match{{ViewHash: "a"}, {ViewHash: "b"}, {ViewHash: "c", Fast: true}}
	if got := lastViewHash(h); got != "b" {
		t.Fatalf("last epoch's view hash %q, want b (c was a pass between epochs)", got)
	}
	if got := lastViewHash(nil); got != "" {
		t.Fatalf("before any Match: %q", got)
	}
}

// A member of a shard refuses a digest of its shard by a signer with no
// offer in its view, without a penalty; it takes one by a provider it
// sees, its own, and any of another shard; a node that is no member
// takes the stranger's.
func TestDigestGate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	shards := p2p.Shard{Count: 2}
	self := wiretest.SeededParty(t, 1)
	own := wire.DigestShard(self.ID, shards)
	var mates, others []wiretest.Party
	for seed := byte(2); len(mates) < 2 || len(others) < 1; seed++ {
		p := wiretest.SeededParty(t, seed)
		if wire.DigestShard(p.ID, shards) == own {
			mates = append(mates, p)
		} else {
			others = append(others, p)
		}
	}
	seen, stranger, far := mates[0], mates[1], others[0]
	digestOf := func(p wiretest.Party) p2p.Signed {
		return wiretest.OnWire(t, p, wire.KindDigest, wire.DigestBody{Shard: wire.DigestShard(p.ID, shards), Providers: 2, FreeBoxes: []int{1, 1}})
	}
	gate := func(member bool) digestGate {
		mine, isMember := digestMember(self.ID, own, member)
		if mine != own || isMember != member {
			t.Fatalf("digestMember: %s %v, want %s %v", mine, isMember, own, member)
		}
		return digestGate{book: digest.NewBook(digest.Timing{}, func() time.Time { return now }), self: self.ID, own: own, member: isMember,
			offered: func(id string) bool { return id == seen.ID.String() }}
	}

	g := gate(true)
	if err := g.Validate(digestOf(stranger)); !errors.Is(err, p2p.ErrUnwanted) || errors.Is(err, p2p.ErrForged) {
		t.Fatalf("a stranger's digest of the member's shard: got %v, want unwanted", err)
	}
	if _, ok := g.book.Last(own); ok {
		t.Fatal("the stranger's digest was kept")
	}
	for _, c := range []struct {
		name string
		p    wiretest.Party
		gate digestGate
	}{
		{"a provider in view, of the member's shard", seen, gate(true)},
		{"the member's own", self, gate(true)},
		{"a stranger's, of another shard", far, gate(true)},
		{"a stranger's, at a node that is no member", stranger, gate(false)},
	} {
		if err := c.gate.Validate(digestOf(c.p)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if e, ok := c.gate.book.Last(wire.DigestShard(c.p.ID, shards)); !ok || e.Publisher != c.p.ID {
			t.Errorf("%s: not kept (%v)", c.name, ok)
		}
	}
	// A forged digest stays forged, a penalty, at a member too.
	forged := wiretest.OnWire(t, far, wire.KindDigest, wire.DigestBody{Shard: own, Providers: 1, FreeBoxes: []int{1}})
	if err := gate(true).Validate(forged); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("a digest of the shard signed by a member of another: got %v, want forged", err)
	}
}
