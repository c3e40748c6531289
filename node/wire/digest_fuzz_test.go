package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// digestOf is a well-formed digest of signer's subshard of class, split
// count ways ("" class: its hash shard).
func digestOf(tb testing.TB, signer wiretest.Party, class string, count int) wire.DigestBody {
	tb.Helper()
	shard := wire.DigestShard(signer.ID, p2p.Shard{Class: class, Count: count})
	return wire.DigestBody{
		Shard: shard, Providers: 12, FreeBoxes: []int{4, 5, 0, 3}, Queued: 7, QueuedGPUs: 20, OldestWaitMs: 93_000,
		Held:     []market.HeldRoot{{Root: wiretest.CID(tb, "dataset"), Bytes: 40 << 30, Holders: 3}},
		ViewHash: strings.Repeat("ab", 32),
		Members:  []wire.DigestMember{{ID: signer.ID.String(), Addrs: []string{"/ip4/10.0.0.9/tcp/4001"}}},
	}
}

func TestDigestCheck(t *testing.T) {
	prov := wiretest.SeededParty(t, 1)
	ok := digestOf(t, prov, "", 4)
	if err := ok.Check(prov.ID); err != nil {
		t.Fatalf("a member's digest refused: %v", err)
	}
	other := ok
	other.Shard.Index = (ok.Shard.Index + 1) % 4
	other.Members = nil
	if err := other.Check(prov.ID); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("a digest of another shard than its signer's: got %v, want forged", err)
	}
	class := digestOf(t, prov, "H100x8", 8)
	if err := class.Check(prov.ID); err != nil {
		t.Fatalf("a class subshard member's digest refused: %v", err)
	}
	badClass := digestOf(t, prov, "H100", 8)
	if err := badClass.Check(prov.ID); err == nil {
		t.Fatal("a digest of class H100, which ParseClass refuses, accepted")
	}
	crowded := ok
	crowded.FreeBoxes = []int{20}
	if err := crowded.Check(prov.ID); err == nil {
		t.Fatal("a digest with more free boxes than providers accepted")
	}
}

func FuzzDigestBody(f *testing.F) {
	prov, other := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 3)
	whole := digestOf(f, prov, "", 1)
	hashed := digestOf(f, prov, "", 64)
	class := digestOf(f, prov, "H100x8", 1)
	sub := digestOf(f, prov, "consumer-24G", 16)
	empty := wire.DigestBody{Shard: p2p.Shard{Count: 1}}
	full := digestOf(f, prov, "", 1)
	full.FreeBoxes = make([]int, market.MaxDigestBuckets)
	full.Held = nil
	for i := range market.MaxDigestHeld {
		full.Held = append(full.Held, market.HeldRoot{Root: wiretest.CID(f, "held-"+string(rune('a'+i))), Bytes: 1 << 30, Holders: 1})
	}
	full.Members = append(full.Members, wire.DigestMember{ID: other.ID.String(), Addrs: []string{"/ip4/10.0.0.10/udp/4001/quic-v1"}})
	for _, b := range []wire.DigestBody{whole, hashed, class, sub, empty, full} {
		s := wiretest.OnWire(f, prov, wire.KindDigest, b)
		if err := wire.ValidateDigest(s); err != nil {
			f.Fatalf("valid seed refused: %v", err)
		}
		f.Add([]byte(s.Message.Body))
	}

	foreign := digestOf(f, other, "", 64)
	zeroCount := whole
	zeroCount.Shard.Count = 0
	badClass := digestOf(f, prov, "H100", 1)
	tooMany := whole
	tooMany.FreeBoxes = make([]int, market.MaxDigestBuckets+1)
	negative := whole
	negative.Queued = -1
	twice := whole
	twice.Held = append(twice.Held, twice.Held[0])
	moreHolders := whole
	moreHolders.Held = []market.HeldRoot{{Root: whole.Held[0].Root, Holders: 13}}
	badHash := whole
	badHash.ViewHash = "xyz"
	badAddr := whole
	badAddr.Members = []wire.DigestMember{{ID: prov.ID.String(), Addrs: []string{"/ip4/\u202e10.0.0.9/tcp/1"}}}
	for _, b := range []wire.DigestBody{foreign, zeroCount, badClass, tooMany, negative, twice, moreHolders, badHash, badAddr} {
		f.Add(sealedBody(f, prov, wire.KindDigest, b))
	}
	body := sealedBody(f, prov, wire.KindDigest, whole)
	f.Add(append(bytes.Clone(body), `{}`...))
	f.Add(bytes.Replace(body, []byte(`"queued"`), []byte(`"extra"`), 1))

	f.Fuzz(func(t *testing.T, body []byte) {
		s := p2p.Signed{Signer: prov.ID, Message: p2p.Message{Kind: wire.KindDigest, Body: body}}
		if wire.ValidateDigest(s) != nil {
			return
		}
		b, err := wire.DecodeDigest(s)
		if err != nil {
			t.Fatalf("accepted, but the body does not decode: %v", err)
		}
		// The rules again, stated without Check, so that a change to
		// Check that loosens them fails here.
		if b.Shard.Valid() != nil || b.Shard.Count < 1 {
			t.Fatalf("accepted shard %+v", b.Shard)
		}
		if b.Shard.Class != "" {
			if _, err := market.ParseClass(b.Shard.Class); err != nil {
				t.Fatalf("accepted class %q: %v", b.Shard.Class, err)
			}
		}
		if wire.DigestShard(prov.ID, b.Shard) != b.Shard {
			t.Fatalf("accepted a digest of %s from a peer of %s", b.Shard, wire.DigestShard(prov.ID, b.Shard))
		}
		if len(b.FreeBoxes) > market.MaxDigestBuckets || len(b.Held) > market.MaxDigestHeld || len(b.Members) > wire.MaxDigestMembers {
			t.Fatalf("accepted a digest out of bounds: %d buckets, %d held, %d members", len(b.FreeBoxes), len(b.Held), len(b.Members))
		}
		boxes := 0
		for _, n := range b.FreeBoxes {
			if n < 0 {
				t.Fatalf("accepted a negative bucket %d", n)
			}
			boxes += n
		}
		if b.Providers < 0 || boxes > b.Providers || b.Queued < 0 || b.QueuedGPUs < 0 || b.OldestWaitMs < 0 {
			t.Fatalf("accepted counts %+v", b)
		}
		for _, h := range b.Held {
			if h.Holders < 1 || h.Holders > b.Providers {
				t.Fatalf("accepted %d holders of %d providers", h.Holders, b.Providers)
			}
		}
		for _, m := range b.Members {
			id, err := peer.Decode(m.ID)
			if err != nil || wire.DigestShard(id, b.Shard) != b.Shard {
				t.Fatalf("accepted member %q", m.ID)
			}
			if len(m.Addrs) > wire.MaxDigestMemberAddrs {
				t.Fatalf("accepted %d addresses", len(m.Addrs))
			}
			for _, a := range m.Addrs {
				if _, err := ma.NewMultiaddr(a); err != nil {
					t.Fatalf("accepted address %q", a)
				}
			}
		}
	})
}
