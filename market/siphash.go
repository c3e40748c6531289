package market

import (
	"encoding/binary"
	"math/bits"
)

// tieHash is H(seed ‖ kind ‖ s) for tie-breaks: SipHash-2-4 keyed with the
// first half of the seed. SipHash is a keyed hash made for this job (no one
// who does not know the key can aim for a value, and the key, coming from
// the view hash, is not known before the epoch), and it costs a few
// nanoseconds where SHA-256 costs hundreds, which counts at a hundred
// thousand jobs a pass. kind separates the name spaces of jobs, providers
// and submitters, so that a job named like a provider does not share its
// weight.
func tieHash(seed *[32]byte, kind byte, s string) uint64 {
	k0 := binary.LittleEndian.Uint64(seed[0:8])
	k1 := binary.LittleEndian.Uint64(seed[8:16])
	return sipHash24(k0, k1, kind, s)
}

// sipHash24 hashes the byte prefix followed by s.
func sipHash24(k0, k1 uint64, prefix byte, s string) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := 1 + len(s)
	// at returns byte i of prefix ‖ s.
	at := func(i int) uint64 {
		if i == 0 {
			return uint64(prefix)
		}
		return uint64(s[i-1])
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		var m uint64
		if i == 0 {
			m = uint64(prefix)
			for b := 1; b < 8; b++ {
				m |= uint64(s[b-1]) << (8 * b)
			}
		} else {
			w := s[i-1 : i+7]
			m = uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		}
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	m := uint64(n) << 56
	for b := 0; i+b < n; b++ {
		m |= at(i+b) << (8 * b)
	}
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
