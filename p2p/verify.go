package p2p

import (
	"github.com/libp2p/go-libp2p/core/crypto"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Every node checks the signature of each gossip message it accepts, and
// the lease inside each lease announcement carries two more: a few dozen
// Ed25519 verifications a job on every peer. They are made with
// curve25519-voi, which verifies in about 30 µs where crypto/ed25519 (what
// libp2p's keys call) takes 53 (go test ./p2p -bench Verify), under the
// rules of crypto/ed25519.Verify, so that every peer, whatever checks it,
// gives each signature the same verdict (TestVerifySignatureAgreesWithStdlib).

// stdlibRules make voi accept exactly what crypto/ed25519.Verify accepts.
// Never written.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// VerifySignature reports whether sig is pk's signature of msg. Ed25519 keys
// are checked with voi; other key types by the key itself.
func VerifySignature(pk crypto.PubKey, msg, sig []byte) bool {
	if ed, ok := pk.(*crypto.Ed25519PublicKey); ok {
		raw, err := ed.Raw()
		if err != nil || len(raw) != voi.PublicKeySize {
			return false
		}
		return voi.VerifyWithOptions(voi.PublicKey(raw), msg, sig, stdlibRules)
	}
	ok, err := pk.Verify(msg, sig)
	return err == nil && ok
}
