package p2p

import (
	stded "crypto/ed25519"
	"encoding/hex"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/record"
	"pgregory.net/rapid"
)

// groupOrder is L, the order of Ed25519's prime-order group, little-endian.
const groupOrder = "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"

// TestVerifySignatureAgreesWithStdlib: VerifySignature gives
// crypto/ed25519.Verify's verdict on honest signatures and on the spoilt
// ones where verifiers differ: a flipped bit, S + L (a non-canonical S), a
// short signature.
func TestVerifySignatureAgreesWithStdlib(t *testing.T) {
	l, err := hex.DecodeString(groupOrder)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "seed")
		msg := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(rt, "msg")
		priv := stded.NewKeyFromSeed(seed)
		pub := priv.Public().(stded.PublicKey)
		sig := stded.Sign(priv, msg)
		switch rapid.IntRange(0, 4).Draw(rt, "spoil") {
		case 1:
			i := rapid.IntRange(0, 8*len(sig)-1).Draw(rt, "bit")
			sig[i/8] ^= 1 << (i % 8)
		case 2:
			if len(msg) > 0 {
				msg[0] ^= 1
			}
		case 3:
			var carry uint16
			for i := 32; i < 64; i++ {
				sum := uint16(sig[i]) + uint16(l[i-32]) + carry
				sig[i], carry = byte(sum), sum>>8
			}
		case 4:
			sig = sig[:rapid.IntRange(0, 63).Draw(rt, "len")]
		}
		pk, err := crypto.UnmarshalEd25519PublicKey(pub)
		if err != nil {
			rt.Fatal(err)
		}
		if got, want := VerifySignature(pk, msg, sig), stded.Verify(pub, msg, sig); got != want {
			rt.Fatalf("VerifySignature %v, crypto/ed25519 %v", got, want)
		}
	})
}

// TestOpenAgreesWithLibp2p: Open, which reads the envelope in one pass,
// accepts exactly the envelopes libp2p's record package accepts, with any
// one byte of a sealed envelope changed.
func TestOpenAgreesWithLibp2p(t *testing.T) {
	s, err := Seal(newKey(t), "offer", map[string]int{"gpus": 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Raw {
		for _, x := range []byte{0x01, 0x80} {
			bad := append([]byte(nil), s.Raw...)
			bad[i] ^= x
			_, err := Open(bad)
			var m Message
			_, want := record.ConsumeTypedEnvelope(bad, &m)
			if (err == nil) != (want == nil) {
				t.Errorf("byte %d ^ %#x: Open says %v, libp2p %v", i, x, err, want)
			}
		}
	}
}

// BenchmarkVerify is the verification of one gossip envelope's signature,
// against the same check by the key libp2p decodes (crypto/ed25519).
func BenchmarkVerify(b *testing.B) {
	sk := newKey(b)
	msg := make([]byte, 1200)
	sig, err := sk.Sign(msg)
	if err != nil {
		b.Fatal(err)
	}
	pk := sk.GetPublic()
	b.Run("libp2p", func(b *testing.B) {
		for b.Loop() {
			if ok, err := pk.Verify(msg, sig); !ok || err != nil {
				b.Fatal("does not verify")
			}
		}
	})
	b.Run("voi", func(b *testing.B) {
		for b.Loop() {
			if !VerifySignature(pk, msg, sig) {
				b.Fatal("does not verify")
			}
		}
	})
}
