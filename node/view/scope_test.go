package view

import (
	"errors"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// The jobs topic of a class scope takes a declaration, alone or in a
// requeue, only if it names that scope: one replayed into another
// subshard would be leased there a second time.
func TestJobChecksInClassScope(t *testing.T) {
	sub := wiretest.FreshParty(t)
	here := p2p.Shard{Class: "H100x8", Index: 1, Count: 2}
	there := p2p.Shard{Class: "H100x8", Index: 0, Count: 2}
	declared := func(m *p2p.Shard) p2p.Signed {
		b := wiretest.Declaration(t)
		b.Market = m
		return wiretest.OnWire(t, sub, wire.KindDeclaration, b)
	}
	requeued := func(d p2p.Signed) p2p.Signed {
		return wiretest.OnWire(t, sub, wire.KindRequeue, wire.RequeueBody{Declarations: [][]byte{d.Raw}})
	}
	checks := NewJobChecks(NewMarket()).In(here)
	for _, tc := range []struct {
		name string
		decl p2p.Signed
		ok   bool
	}{
		{name: "names this subshard", decl: declared(&here), ok: true},
		{name: "names another subshard", decl: declared(&there)},
		{name: "names no market", decl: declared(nil)},
	} {
		for kind, m := range map[string]p2p.Signed{"declaration": tc.decl, "requeue": requeued(tc.decl)} {
			err := checks.Validate(m)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, wire.ErrOutOfScope) {
				t.Errorf("%s, as a %s: %v, want ok %v", tc.name, kind, err, tc.ok)
			}
		}
	}
	// Outside a class scope nothing changes: a declaration names no market.
	if err := NewJobChecks(NewMarket()).Validate(declared(nil)); err != nil {
		t.Errorf("one market: %v", err)
	}
}
