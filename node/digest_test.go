package node

import (
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
