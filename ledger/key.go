package ledger

import (
	"bytes"
	"errors"

	"github.com/libp2p/go-libp2p/core/crypto"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// SigningKey is a node's private key checked once for everything it signs.
//
// An Ed25519 private key carries its public half, which is what its peer ID
// names, and signing uses it as given: a key whose halves disagree (an
// edited key file) makes signatures that verify under no key. signWith
// derives the public half again from the seed before every receipt it
// signs, which costs about half a signature; a SigningKey does it once, at
// NewSigningKey, and then signs receipts, leases and gossip envelopes alike
// with voi, the bytes crypto/ed25519 would make (Ed25519 is deterministic).
//
// It is a crypto.PrivKey, so it goes wherever the plain key went; keys of
// other types sign through their own Sign, as before.
type SigningKey struct {
	crypto.PrivKey
	ed voi.PrivateKey // the checked Ed25519 key; nil for other key types
}

// ErrKeyHalves is an Ed25519 private key whose public half is not the one
// its seed makes: everything it signed would verify under no peer ID.
var ErrKeyHalves = errors.New("the private key's public half does not match its seed")

// NewSigningKey checks sk and returns it ready to sign. An Ed25519 key whose
// public half does not match its seed is refused with ErrKeyHalves.
func NewSigningKey(sk crypto.PrivKey) (*SigningKey, error) {
	if k, ok := sk.(*SigningKey); ok {
		return k, nil
	}
	k := &SigningKey{PrivKey: sk}
	if e, ok := sk.(*crypto.Ed25519PrivateKey); ok {
		priv, err := checkedEd25519(e)
		if err != nil {
			return nil, err
		}
		k.ed = priv
	}
	return k, nil
}

// Sign signs msg: an Ed25519 key with voi, without checking it again.
func (k *SigningKey) Sign(msg []byte) ([]byte, error) {
	if k.ed != nil {
		return voi.Sign(k.ed, msg), nil
	}
	return k.PrivKey.Sign(msg)
}

// Equals reports whether o is the same key, wrapped or not.
func (k *SigningKey) Equals(o crypto.Key) bool {
	if w, ok := o.(*SigningKey); ok {
		o = w.PrivKey
	}
	return k.PrivKey.Equals(o)
}

// checkedEd25519 returns e as voi's private key after deriving its public
// half from its seed again and finding it equal to the one it carries.
func checkedEd25519(e *crypto.Ed25519PrivateKey) (voi.PrivateKey, error) {
	raw, err := e.Raw()
	if err != nil || len(raw) != voi.PrivateKeySize {
		return nil, errors.New("malformed Ed25519 private key")
	}
	priv := voi.NewKeyFromSeed(raw[:voi.SeedSize])
	if !bytes.Equal(priv[voi.SeedSize:], raw[voi.SeedSize:]) {
		return nil, ErrKeyHalves
	}
	return priv, nil
}
