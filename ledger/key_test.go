package ledger

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestSigningKeySignsAsThePlainKey: a SigningKey makes the very bytes the
// key it wraps makes, for raw messages and receipts alike, passes for that
// key wherever a key is compared, and its receipts go into a ledger noted as
// made here (so Append does not check them again) and verify.
func TestSigningKeySignsAsThePlainKey(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	pk, sk := prov.signing(t), sub.signing(t)

	msg := []byte("e31 lease terms")
	want, err := prov.sk.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pk.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("SigningKey.Sign = %x, the plain key's = %x", got, want)
	}
	if ok, err := prov.sk.GetPublic().Verify(msg, got); err != nil || !ok {
		t.Fatalf("the plain key's public half does not verify the SigningKey's signature: %v %v", ok, err)
	}
	if !prov.id.MatchesPrivateKey(pk) {
		t.Error("the peer ID does not match its SigningKey")
	}
	if !pk.Equals(prov.sk) || !prov.sk.Equals(pk) || !pk.Equals(prov.signing(t)) || pk.Equals(sk) {
		t.Error("Equals does not see through the wrapper, or sees two keys as one")
	}
	if again, err := NewSigningKey(pk); err != nil || again != pk {
		t.Errorf("NewSigningKey of a SigningKey = %p, %v; want the same key", again, err)
	}

	plain := sign(t, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	if err := r.SignProvider(pk); err != nil {
		t.Fatal(err)
	}
	if err := r.Countersign(sk); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.ProviderSig, plain.ProviderSig) || !bytes.Equal(r.SubmitterSig, plain.SubmitterSig) {
		t.Fatal("a receipt signed with SigningKeys differs from one signed with the plain keys")
	}
	msgBytes := r.SigningBytes()
	if !r.made.has(SignerProvider, msgBytes, r.ProviderSig) || !r.made.has(SignerSubmitter, msgBytes, r.SubmitterSig) {
		t.Error("signatures made with a SigningKey are not noted as made here")
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	l, err := Open(context.Background(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(context.Background(), r); err != nil {
		t.Fatalf("append a receipt signed with SigningKeys: %v", err)
	}
}

// TestNewSigningKeyRefusesForeignPublicHalf: the check signWith makes at
// every receipt for a plain key, NewSigningKey makes once, and refuses
// the same key.
func TestNewSigningKeyRefusesForeignPublicHalf(t *testing.T) {
	prov, other := newParty(t, 1), newParty(t, 3)
	bad := prov.withForeignHalf(t, other)
	if k, err := NewSigningKey(bad); !errors.Is(err, ErrKeyHalves) {
		t.Fatalf("NewSigningKey of a key whose halves disagree = %v, %v; want ErrKeyHalves", k, err)
	}
}

// TestSigningKeyOfOtherTypes: a key that is not Ed25519 signs through its
// own Sign, and its receipts are checked at Append as before.
func TestSigningKeyOfOtherTypes(t *testing.T) {
	sk, _, err := crypto.GenerateSecp256k1Key(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewSigningKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("offer")
	sig, err := k.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sk.GetPublic().Verify(msg, sig); err != nil || !ok {
		t.Fatalf("a secp256k1 SigningKey's signature does not verify: %v %v", ok, err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil || !id.MatchesPrivateKey(sk) {
		t.Fatalf("peer ID of the wrapped key: %v %v", id, err)
	}
	if _, valid, err := signWith(k, msg); err != nil || valid {
		t.Fatalf("signWith a secp256k1 SigningKey: valid %v, %v; want a signature still to be checked", valid, err)
	}
}
