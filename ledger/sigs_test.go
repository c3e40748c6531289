package ledger

import (
	"bytes"
	"context"
	stded "crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	"pgregory.net/rapid"
)

// smallOrder are the canonical encodings of the eight points of order
// dividing 8; TestSmallOrderFixture checks they are.
var smallOrder = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // order 4
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8
}

// nonCanonicalOne encodes y = p+1, which reduces to the identity's y = 1.
const nonCanonicalOne = "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"

// groupOrder is L, little-endian.
const groupOrder = "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func decodePoint(tb testing.TB, b []byte) *curve.EdwardsPoint {
	tb.Helper()
	var c curve.CompressedEdwardsY
	var p curve.EdwardsPoint
	if _, err := c.SetBytes(b); err != nil {
		tb.Fatal(err)
	}
	if _, err := p.SetCompressedY(&c); err != nil {
		tb.Fatalf("%x does not decode: %v", b, err)
	}
	return &p
}

func TestSmallOrderFixture(t *testing.T) {
	for _, s := range smallOrder {
		if p := decodePoint(t, mustHex(t, s)); !p.IsSmallOrder() {
			t.Errorf("%s is not of small order", s)
		}
	}
	if !decodePoint(t, mustHex(t, nonCanonicalOne)).IsIdentity() {
		t.Error("non-canonical one does not decode to the identity")
	}
}

// keyOf builds the ledger's key for raw Ed25519 public key bytes the way a
// receipt's peer ID gives it.
func keyOf(tb testing.TB, raw []byte, expanded bool) *pubKey {
	tb.Helper()
	pk, err := crypto.UnmarshalEd25519PublicKey(raw)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		tb.Fatal(err)
	}
	get := publicKey
	if expanded {
		get = expandedKey
	}
	k, err := get(id)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// sigCase is a public key, message and signature, honest or not.
type sigCase struct {
	pub, msg, sig []byte
}

// drawSigCase draws a key and message, signs, and then maybe spoils one
// part the ways that separate Ed25519 verifiers: flipped bits, S + L, a
// small-order or non-canonical R, a small-order key with a signature that
// crypto/ed25519 accepts for some messages, a short signature.
func drawSigCase(t *rapid.T, label string) sigCase {
	seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label+" seed")
	msg := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label+" msg")
	priv := stded.NewKeyFromSeed(seed)
	c := sigCase{pub: bytes.Clone(priv[32:]), msg: msg, sig: stded.Sign(priv, msg)}
	flip := func(b []byte) {
		if len(b) == 0 {
			return
		}
		i := rapid.IntRange(0, 8*len(b)-1).Draw(t, label+" bit")
		b[i/8] ^= 1 << (i % 8)
	}
	switch rapid.IntRange(0, 9).Draw(t, label+" spoil") {
	case 0, 1, 2: // honest
	case 3:
		flip(c.sig)
	case 4:
		flip(c.msg)
	case 5:
		flip(c.pub)
	case 6: // S + L: the same S, not canonical
		var carry uint16
		l := mustHexT(t, groupOrder)
		for i := 32; i < 64; i++ {
			sum := uint16(c.sig[i]) + uint16(l[i-32]) + carry
			c.sig[i], carry = byte(sum), sum>>8
		}
	case 7: // R replaced by a small-order point or a non-canonical encoding
		bad := append(smallOrder, nonCanonicalOne)
		copy(c.sig[:32], mustHexT(t, rapid.SampledFrom(bad).Draw(t, label+" R")))
	case 8: // a small-order key, and R = [S]B: valid for crypto/ed25519
		// exactly when [k]A is the identity, which depends on the message
		c.pub = mustHexT(t, rapid.SampledFrom(smallOrder).Draw(t, label+" A"))
		wide := rapid.SliceOfN(rapid.Byte(), 64, 64).Draw(t, label+" S")
		s, err := scalar.NewFromBytesModOrderWide(wide)
		if err != nil {
			t.Fatal(err)
		}
		var r curve.EdwardsPoint
		r.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, s)
		var rc curve.CompressedEdwardsY
		rc.SetEdwardsPoint(&r)
		copy(c.sig[:32], rc[:])
		if err := s.ToBytes(c.sig[32:]); err != nil {
			t.Fatal(err)
		}
	case 9:
		c.sig = c.sig[:rapid.IntRange(0, 63).Draw(t, label+" len")]
	}
	return c
}

func mustHexT(t *rapid.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPropertyVerifyMatchesStdlib: one signature checked alone, with or
// without the key's tables, gets crypto/ed25519.Verify's answer, whatever
// was done to it.
func TestPropertyVerifyMatchesStdlib(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := drawSigCase(rt, "")
		want := stded.Verify(c.pub, c.msg, c.sig)
		for _, expanded := range []bool{false, true} {
			got, err := keyOf(t, c.pub, expanded).verify(c.msg, c.sig)
			if err != nil || got != want {
				rt.Fatalf("expanded %v: verify %v, %v; crypto/ed25519 says %v", expanded, got, err, want)
			}
		}
	})
}

// TestPropertyBatchMatchesStdlib: a batch of signatures, any of them
// spoiled, passes exactly when crypto/ed25519 accepts every one; where it
// fails, checking each alone names exactly the ones crypto/ed25519 refuses.
func TestPropertyBatchMatchesStdlib(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		items := make([]sigItem, n)
		want := true
		for i := range items {
			c := drawSigCase(rt, "item")
			ok := stded.Verify(c.pub, c.msg, c.sig)
			want = want && ok
			items[i] = sigItem{key: keyOf(t, c.pub, true), msg: c.msg, sig: c.sig}
			if single := checkSig(items[i].key, c.msg, c.sig) == nil; single != ok {
				rt.Fatalf("item %d alone: %v, crypto/ed25519 says %v", i, single, ok)
			}
		}
		if got := verifySigs(items); got != want {
			rt.Fatalf("batch of %d: %v, crypto/ed25519 says %v", n, got, want)
		}
	})
}

// TestPropertySignMatchesStdlib: signatures are byte for byte those of
// crypto/ed25519, through the libp2p key a node holds.
func TestPropertySignMatchesStdlib(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "seed")
		msg := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(rt, "msg")
		sk, _, err := crypto.GenerateEd25519Key(bytes.NewReader(seed))
		if err != nil {
			rt.Fatal(err)
		}
		got, valid, err := signWith(sk, msg)
		if err != nil || !valid {
			rt.Fatal(valid, err)
		}
		want, err := sk.Sign(msg)
		if err != nil || !bytes.Equal(got, want) {
			rt.Fatalf("signature %x, crypto/ed25519 %x (%v)", got, want, err)
		}
	})
}

// TestBatchTorsionR pins the one difference batch.go documents: a signer
// that adds a small-order point to its own R gets a signature the batch
// accepts and crypto/ed25519 refuses. Append checks alone and refuses it.
func TestBatchTorsionR(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	r.SignProvider(prov.sk)
	msg := r.SigningBytes()

	// Sign msg as sub with nonce commitment R = [n]B + T, T of order 8.
	raw, err := sub.sk.Raw()
	if err != nil {
		t.Fatal(err)
	}
	h := sha512.Sum512(raw[:32])
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	var a scalar.Scalar
	if _, err := a.SetBits(h[:32]); err != nil {
		t.Fatal(err)
	}
	nonce, err := scalar.NewFromBytesModOrderWide(bytes.Repeat([]byte{7}, 64))
	if err != nil {
		t.Fatal(err)
	}
	var R curve.EdwardsPoint
	R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, nonce)
	R.Add(&R, decodePoint(t, mustHex(t, smallOrder[4])))
	var rc curve.CompressedEdwardsY
	rc.SetEdwardsPoint(&R)
	kh := sha512.New()
	kh.Write(rc[:])
	kh.Write(raw[32:])
	kh.Write(msg)
	k, err := scalar.NewFromBytesModOrderWide(kh.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	var s scalar.Scalar
	s.Mul(k, &a)
	s.Add(&s, nonce)
	sig := make([]byte, 64)
	copy(sig, rc[:])
	if err := s.ToBytes(sig[32:]); err != nil {
		t.Fatal(err)
	}
	r.SubmitterSig = sig

	if stded.Verify(raw[32:], msg, sig) {
		t.Fatal("crypto/ed25519 accepts a signature with a small-order R component")
	}
	subKey, err := expandedKey(sub.id)
	if err != nil {
		t.Fatal(err)
	}
	if !verifySigs([]sigItem{{key: subKey, msg: msg, sig: sig}}) {
		t.Error("the batch refuses it: batch.go's note on small-order R is out of date")
	}
	if err := r.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Receipt.Verify: %v, want ErrBadSignature", err)
	}
	l := openMem(t, Options{})
	if _, err := l.Append(context.Background(), r); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Append: %v, want ErrBadSignature", err)
	}
}
