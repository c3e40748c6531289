package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Signatures are made and checked with curve25519-voi rather than
// crypto/ed25519 because it is about twice as fast for both, and because it
// can check many signatures at once (batch.go). Ed25519 signing is
// deterministic, so the signatures are byte for byte those crypto/ed25519
// makes. Verification is pinned to crypto/ed25519's rules wherever a
// verdict is final (see stdlibRules); the property tests hold the two to
// the same answers.

// stdlibRules make voi accept exactly the signatures crypto/ed25519.Verify
// accepts: a canonical S, an R that is the canonical encoding of the point
// the cofactorless equation yields, any A that decodes (non-canonical and
// small-order encodings included). Never written.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// pubKey is a signer's public key, decoded once and kept in the form each
// way of checking needs.
type pubKey struct {
	pk crypto.PubKey // as the peer ID embeds it
	// Set for Ed25519 keys only; other key types go through pk.Verify.
	ed voi.PublicKey
	// exp holds precomputed tables for the key: worth building for a key
	// that signs many receipts (a ledger names few peers), not for one.
	exp *voi.ExpandedPublicKey
	// batchable: an Ed25519 key in the prime-order subgroup, as every key
	// made by key generation is. Batch verification checks the cofactored
	// equation, which for a key with a small-order component accepts
	// signatures crypto/ed25519 refuses, so such keys are checked one by one.
	batchable bool
}

// publicKey extracts the key a peer ID embeds. A hashed peer ID (RSA, ECDSA)
// has none, and a receipt from such a peer could not be checked by a third
// party, so it counts as a bad signature.
func publicKey(id peer.ID) (*pubKey, error) {
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: no public key in peer ID %q: %w", ErrBadSignature, id, err)
	}
	k := &pubKey{pk: pk}
	if e, ok := pk.(*crypto.Ed25519PublicKey); ok {
		raw, err := e.Raw()
		if err == nil && len(raw) == voi.PublicKeySize {
			k.ed = voi.PublicKey(raw)
		}
	}
	return k, nil
}

// expandedKey is publicKey with the tables and the subgroup check that
// repeated and batched checks use.
func expandedKey(id peer.ID) (*pubKey, error) {
	k, err := publicKey(id)
	if err != nil || k.ed == nil {
		return k, err
	}
	if exp, err := voi.NewExpandedPublicKey(k.ed); err == nil {
		k.exp = exp
	}
	var c curve.CompressedEdwardsY
	var a curve.EdwardsPoint
	if _, err := c.SetBytes(k.ed); err == nil {
		if _, err := a.SetCompressedY(&c); err == nil {
			k.batchable = k.exp != nil && a.IsTorsionFree()
		}
	}
	return k, nil
}

// verify reports whether sig is a valid signature of msg under crypto/ed25519's
// rules (or the key type's own, for other key types).
func (k *pubKey) verify(msg, sig []byte) (bool, error) {
	switch {
	case k.exp != nil:
		return voi.VerifyExpandedWithOptions(k.exp, msg, sig, stdlibRules), nil
	case k.ed != nil:
		return voi.VerifyWithOptions(k.ed, msg, sig, stdlibRules), nil
	}
	return k.pk.Verify(msg, sig)
}

func checkSig(k *pubKey, msg, sig []byte) error {
	if len(sig) == 0 {
		return ErrUnsigned
	}
	ok, err := k.verify(msg, sig)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}

// signWith signs msg with sk: an Ed25519 key through voi, any other through
// its own Sign. An Ed25519 key's public half is checked against its seed
// first (checkedEd25519), at every call for a plain key and once for a
// SigningKey. That makes every Ed25519 signature made here valid by
// construction, which is what lets Append skip checking it. valid reports
// the Ed25519 case, whose signature is known to verify.
func signWith(sk crypto.PrivKey, msg []byte) (sig []byte, valid bool, err error) {
	if k, ok := sk.(*SigningKey); ok {
		if k.ed != nil {
			return voi.Sign(k.ed, msg), true, nil
		}
		sk = k.PrivKey
	}
	e, ok := sk.(*crypto.Ed25519PrivateKey)
	if !ok {
		sig, err = sk.Sign(msg)
		return sig, false, err
	}
	priv, err := checkedEd25519(e)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrWrongKey, err)
	}
	return voi.Sign(priv, msg), true, nil
}

// signedHere records signatures this process made on a receipt, each by
// the digest of what it covers and of the signature itself. Only
// SignProvider and Countersign write it, with an Ed25519 key checked whole
// (signWith), so a signature it names is valid under the receipt's peer
// ID. It binds the exact bytes: a receipt edited after signing, or given
// another signature, no longer matches and is checked as usual. It is
// never copied into JSON, so a receipt from the network never carries one.
// Immutable once made: receipts copied by value share it.
type signedHere struct {
	provider, submitter [sha256.Size]byte // zero: not signed here
}

func madeDigest(msg, sig []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(msg))))
	h.Write(msg)
	h.Write(sig)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// with returns a copy of m that also records sig over msg made as role.
func (m *signedHere) with(role Signer, msg, sig []byte) *signedHere {
	var n signedHere
	if m != nil {
		n = *m
	}
	if role == SignerSubmitter {
		n.submitter = madeDigest(msg, sig)
	} else {
		n.provider = madeDigest(msg, sig)
	}
	return &n
}

// has reports whether sig over msg was made here as role.
func (m *signedHere) has(role Signer, msg, sig []byte) bool {
	if m == nil || len(sig) == 0 {
		return false
	}
	want := m.provider
	if role == SignerSubmitter {
		want = m.submitter
	}
	return want != [sha256.Size]byte{} && madeDigest(msg, sig) == want
}

// keyCache keeps expanded keys by peer ID, for a ledger's Appends. It is
// bounded: past maxCachedKeys it starts again, which costs a few key
// expansions and keeps memory flat whatever peers a node meets.
type keyCache struct {
	mu   sync.Mutex
	keys map[peer.ID]*pubKey // guarded by mu
}

const maxCachedKeys = 1024

func (c *keyCache) get(id peer.ID) (*pubKey, error) {
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	// Expanded outside the lock: two callers may both build it, which is
	// harmless.
	k, err := expandedKey(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		c.keys = make(map[peer.ID]*pubKey)
	}
	c.keys[id] = k
	c.mu.Unlock()
	return k, nil
}
