package wire_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

func gangOf(sub wiretest.Party, provs ...wiretest.Party) wire.SignedGangLease {
	g := wire.GangLease{Gang: "g1", Submitter: sub.ID.String()}
	for i, p := range provs {
		g.Parts = append(g.Parts, wire.GangPart{Rank: i, Provider: p.ID.String(), Lease: "lease-" + string(rune('a'+i))})
	}
	return wire.SignedGangLease{Terms: g}
}

// A gang lease verifies once every part's provider and then the submitter
// signed it, each with the key the terms name, and not before; a change to
// the terms breaks every signature.
func TestGangLeaseSignatures(t *testing.T) {
	sub, a, b := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	l := gangOf(sub, a, b)
	if err := l.SignProvider(a.SK, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(); !errors.Is(err, wire.ErrGang) {
		t.Fatalf("one of two providers signed: %v, want ErrGang", err)
	}
	if err := l.SignProvider(b.SK, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(); !errors.Is(err, wire.ErrGang) {
		t.Fatalf("no submitter signature: %v, want ErrGang", err)
	}
	if err := l.SignSubmitter(sub.SK); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	swapped := l
	swapped.ProviderSigs = [][]byte{l.ProviderSigs[1], l.ProviderSigs[0]}
	if err := swapped.Verify(); !errors.Is(err, wire.ErrGang) {
		t.Fatalf("signatures swapped between parts: %v, want ErrGang", err)
	}
	moved := l
	moved.Terms.Parts = append([]wire.GangPart(nil), l.Terms.Parts...)
	moved.Terms.Parts[1].Lease = "lease-z"
	if err := moved.Verify(); !errors.Is(err, wire.ErrGang) {
		t.Fatalf("terms changed after signing: %v, want ErrGang", err)
	}
}

// The stateless checks refuse a gang lease whose parts are out of order,
// share a provider or a lease, or do not include the part asked about.
func TestGangRequestValidate(t *testing.T) {
	sub, a, b := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	ok := wire.GangRequest{Lease: "lease-b", Gang: gangOf(sub, a, b)}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*wire.GangRequest){
		"not a part":    func(r *wire.GangRequest) { r.Lease = "lease-q" },
		"one part":      func(r *wire.GangRequest) { r.Gang.Terms.Parts = r.Gang.Terms.Parts[:1] },
		"out of order":  func(r *wire.GangRequest) { r.Gang.Terms.Parts[0].Rank = 1 },
		"same provider": func(r *wire.GangRequest) { r.Gang.Terms.Parts[1].Provider = r.Gang.Terms.Parts[0].Provider },
		"same lease":    func(r *wire.GangRequest) { r.Gang.Terms.Parts[1].Lease = "lease-a"; r.Lease = "lease-a" },
		"no gang":       func(r *wire.GangRequest) { r.Gang.Terms.Gang = "" },
		"bad submitter": func(r *wire.GangRequest) { r.Gang.Terms.Submitter = "nobody" },
		"bad provider":  func(r *wire.GangRequest) { r.Gang.Terms.Parts[0].Provider = "nobody" },
		"too many sigs": func(r *wire.GangRequest) { r.Gang.ProviderSigs = make([][]byte, 3) },
	} {
		r := ok
		r.Gang.Terms.Parts = append([]wire.GangPart(nil), ok.Gang.Terms.Parts...)
		bad(&r)
		if err := r.Validate(); !errors.Is(err, wire.ErrGang) {
			t.Errorf("%s: %v, want ErrGang", name, err)
		}
	}
}

// FuzzGangRequest feeds the gang protocol's decoder what a hostile peer
// could send: nothing may panic, and what is accepted is within bounds.
func FuzzGangRequest(f *testing.F) {
	sub, a, b := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 2), wiretest.SeededParty(f, 3)
	good := wire.GangRequest{Lease: "lease-a", Gang: gangOf(sub, a, b)}
	raw, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	good.Start = true
	raw, _ = json.Marshal(good)
	f.Add(raw)
	f.Add([]byte(`{"lease":"x","gang":{"terms":{"gang":"g","submitter":"","parts":[]},"provider_sigs":null}}`))
	f.Add([]byte(`{"lease":"","gang":{"terms":{"gang":"g","submitter":"s","parts":[{"rank":0},{"rank":0}]},"provider_sigs":[[],[],[]]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r wire.GangRequest
		if p2p.DecodeStrict(b, &r) != nil || r.Validate() != nil {
			return
		}
		if n := len(r.Gang.Terms.Parts); n < 2 || len(r.Gang.ProviderSigs) > n {
			t.Fatalf("accepted %d parts with %d signatures", n, len(r.Gang.ProviderSigs))
		}
		if _, ok := r.Gang.Terms.Part(r.Lease); !ok {
			t.Fatalf("accepted a request for lease %q, no part of the gang", r.Lease)
		}
		_ = r.Gang.Verify()
	})
}
