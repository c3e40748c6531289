package wire_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func FuzzSignedLease(f *testing.F) {
	prov, sub := wiretest.SeededParty(f, 1), wiretest.SeededParty(f, 2)
	good := wiretest.SignedLease(f, prov, sub)
	goodTerms := mustMarshal(f, good.Terms)

	f.Add(mustMarshal(f, good), uint16(0), byte('{'))
	f.Add(mustMarshal(f, good), uint16(3), byte('I'))
	f.Add(mustMarshal(f, good), uint16(len(goodTerms)/2), byte('0'))
	provOnly := good
	provOnly.SubmitterSig = nil
	f.Add(mustMarshal(f, provOnly), uint16(bytes.Index(goodTerms, []byte(`"cpus":`))+7), byte('9'))
	// A pair of secp256k1 identities, whose keys are inlined in their peer
	// IDs as Ed25519 keys are, so verify reaches another key type.
	k1, _, err := crypto.GenerateSecp256k1Key(bytes.NewReader(bytes.Repeat([]byte{4}, 64)))
	if err != nil {
		f.Fatal(err)
	}
	k2, _, err := crypto.GenerateSecp256k1Key(bytes.NewReader(bytes.Repeat([]byte{5}, 64)))
	if err != nil {
		f.Fatal(err)
	}
	id1, _ := peer.IDFromPrivateKey(k1)
	id2, _ := peer.IDFromPrivateKey(k2)
	f.Add(mustMarshal(f, wiretest.SignedLease(f, wiretest.Party{SK: k1, ID: id1}, wiretest.Party{SK: k2, ID: id2})), uint16(1), byte('x'))
	f.Add([]byte(`{"terms":{"provider":"12D3KooW","submitter":""},"provider_sig":"AAAA"}`), uint16(7), byte(0x80))
	f.Add([]byte(`{"terms":null,"provider_sig":null}`), uint16(0), byte(0))

	f.Fuzz(func(t *testing.T, raw []byte, pos uint16, b byte) {
		// Any lease at all: verify must answer, not panic.
		var l wire.SignedLease
		if p2p.DecodeStrict(raw, &l) == nil {
			_ = l.Verify(false)
			_ = l.Verify(true)
		}
		// The real lease with one byte of its terms changed.
		i := int(pos) % len(goodTerms)
		if goodTerms[i] == b {
			return
		}
		tampered := bytes.Clone(goodTerms)
		tampered[i] = b
		checkTamperedTerms(t, good, tampered)
	})
}

// checkTamperedTerms checks that good's signatures do not cover terms that
// decode from tampered to anything else. encoding/json matches keys without
// regard to case, so "ID" for "id" yields the very same terms, which the
// signatures rightly still cover.
func checkTamperedTerms(t *testing.T, good wire.SignedLease, tampered []byte) (decoded bool) {
	t.Helper()
	var terms wire.LeaseTerms
	if p2p.DecodeStrict(tampered, &terms) != nil {
		return false
	}
	l := wire.SignedLease{Terms: terms, ProviderSig: good.ProviderSig, SubmitterSig: good.SubmitterSig}
	err := l.Verify(true)
	switch same := reflect.DeepEqual(terms, good.Terms); {
	case same && err != nil:
		t.Fatalf("terms %s decode unchanged but no longer verify: %v", tampered, err)
	case !same && err == nil:
		t.Fatalf("tampered terms %s verify under the original signatures", tampered)
	}
	return true
}

func TestSignedLeaseTamper(t *testing.T) {
	prov, sub := wiretest.FreshParty(t), wiretest.FreshParty(t)
	good := wiretest.SignedLease(t, prov, sub)
	if err := good.Verify(true); err != nil {
		t.Fatalf("a lease signed by both parties does not verify: %v", err)
	}
	provOnly := good
	provOnly.SubmitterSig = nil
	if err := provOnly.Verify(false); err != nil {
		t.Fatalf("a proposal signed by its provider does not verify: %v", err)
	}
	if err := provOnly.Verify(true); err == nil {
		t.Fatal("a lease without the submitter's signature verifies as countersigned")
	}
	swapped := good
	swapped.ProviderSig, swapped.SubmitterSig = good.SubmitterSig, good.ProviderSig
	if err := swapped.Verify(false); err == nil {
		t.Fatal("the submitter's signature passes for the provider's")
	}

	terms := mustMarshal(t, good.Terms)
	decoded := 0
	for i := range terms {
		for _, b := range []byte{terms[i] ^ 0x01, terms[i] ^ 0x20, '0', '9', '"', 'x', 0x80} {
			if b == terms[i] {
				continue
			}
			tampered := bytes.Clone(terms)
			tampered[i] = b
			if checkTamperedTerms(t, good, tampered) {
				decoded++
			}
		}
	}
	// Most changes break the JSON; enough must survive decoding for the
	// check above to have tested the signatures at all.
	if decoded < len(terms) {
		t.Fatalf("only %d of the changed terms decode; the test no longer reaches verify", decoded)
	}

	flip := func(sig []byte, i int) []byte {
		c := bytes.Clone(sig)
		c[i] ^= 0x01
		return c
	}
	for i := range good.ProviderSig {
		l := good
		l.ProviderSig = flip(good.ProviderSig, i)
		if err := l.Verify(false); err == nil {
			t.Fatalf("the provider's signature with byte %d changed verifies", i)
		}
	}
	for i := range good.SubmitterSig {
		l := good
		l.SubmitterSig = flip(good.SubmitterSig, i)
		if err := l.Verify(true); err == nil {
			t.Fatalf("the submitter's signature with byte %d changed verifies", i)
		}
	}
}
