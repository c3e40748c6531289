package wire_test

import (
	"errors"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A class scope's offers topic takes only offers of its class, from
// providers of its subshard; other scopes take any well-formed offer.
func TestOfferValidatorScope(t *testing.T) {
	// Two providers in different subshards of H200x1-4 split two ways.
	var in, out wiretest.Party
	for seed := byte(1); in.ID == "" || out.ID == ""; seed++ {
		p := wiretest.SeededParty(t, seed)
		if p2p.ClassShardOf(p.ID, "H200x1-4", 2).Index == 0 {
			in = p
		} else {
			out = p
		}
	}
	h200 := p2p.Shard{Class: "H200x1-4", Index: 0, Count: 2}
	if c := market.ClassOf(wiretest.Offer(in.ID).Offer.GPUs); c != "H200x1-4" {
		t.Fatalf("the test offer is of class %s", c)
	}
	consumer := func(id peer.ID) wire.OfferBody {
		b := wiretest.Offer(id)
		for i := range b.Offer.GPUs {
			b.Offer.GPUs[i].Model, b.Offer.GPUs[i].MemoryBytes = "NVIDIA GeForce RTX 4090", 24<<30
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		scope p2p.Shard
		by    wiretest.Party
		body  wire.OfferBody
		out   bool
	}{
		{name: "its class and subshard", scope: h200, by: in, body: wiretest.Offer(in.ID)},
		{name: "another subshard's provider", scope: h200, by: out, body: wiretest.Offer(out.ID), out: true},
		{name: "another class's boxes", scope: h200, by: in, body: consumer(in.ID), out: true},
		{name: "a class market of one subshard", scope: p2p.Shard{Class: "H200x1-4"}, by: out, body: wiretest.Offer(out.ID)},
		{name: "consumer boxes in their class", scope: p2p.Shard{Class: "consumer-24G", Count: 1}, by: in, body: consumer(in.ID)},
		{name: "no class: any offer", scope: p2p.Shard{Index: 1, Count: 2}, by: out, body: consumer(out.ID)},
	} {
		err := wire.OfferValidator(tc.scope)(wiretest.OnWire(t, tc.by, wire.KindOffer, tc.body))
		if tc.out != errors.Is(err, wire.ErrOutOfScope) || !tc.out && err != nil {
			t.Errorf("%s: %v, want out of scope: %v", tc.name, err, tc.out)
		}
		if err != nil && (errors.Is(err, p2p.ErrForged) || errors.Is(err, p2p.ErrMalformed)) {
			t.Errorf("%s: %v counts as forged or malformed, not invalid", tc.name, err)
		}
	}
	// The scope's checks come on top of ValidateOffer's.
	if err := wire.OfferValidator(h200)(wiretest.OnWire(t, out, wire.KindOffer, wiretest.Offer(in.ID))); !errors.Is(err, p2p.ErrForged) {
		t.Errorf("an offer naming another provider: %v, want forged", err)
	}
}

// A declaration in a class scope must name it; elsewhere it may name none.
func TestCheckMarket(t *testing.T) {
	sub := p2p.Shard{Class: "H100x8", Index: 1, Count: 4}
	named := func(s p2p.Shard) wire.DeclarationBody {
		b := wiretest.Declaration(t)
		b.Market = &s
		return b
	}
	for _, tc := range []struct {
		name  string
		body  wire.DeclarationBody
		scope p2p.Shard
		ok    bool
	}{
		{name: "names its scope", body: named(sub), scope: sub, ok: true},
		{name: "names another subshard", body: named(p2p.Shard{Class: "H100x8", Index: 2, Count: 4}), scope: sub},
		{name: "names another class", body: named(p2p.Shard{Class: "H100x1-4", Index: 1, Count: 4}), scope: sub},
		{name: "names another split", body: named(p2p.Shard{Class: "H100x8", Index: 1, Count: 8}), scope: sub},
		{name: "names nothing in a class scope", body: wiretest.Declaration(t), scope: sub},
		{name: "count 0 is count 1", body: named(p2p.Shard{Class: "cpu"}), scope: p2p.Shard{Class: "cpu", Count: 1}, ok: true},
		{name: "names nothing in one market", body: wiretest.Declaration(t), scope: p2p.Shard{}, ok: true},
	} {
		err := wire.CheckMarket(tc.body, tc.scope)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, wire.ErrOutOfScope) {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	// A market that is no class market is malformed in any scope.
	for _, m := range []p2p.Shard{{Index: 1, Count: 4}, {Class: "h100", Count: 1}, {Class: "cpu", Index: 3, Count: 2}} {
		b := wiretest.Declaration(t)
		b.Market = &m
		if err := b.Check(); err == nil {
			t.Errorf("declaration naming market %+v passed Check", m)
		}
	}
}
