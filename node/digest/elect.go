package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Round is the round t falls in: Unix time over every. Every peer derives
// the same from its clock, and a round is long enough that clocks a few
// seconds apart agree on it nearly always.
func Round(t time.Time, every time.Duration) int64 {
	return t.UnixMilli() / max(every.Milliseconds(), 1)
}

// Order is the order in which the members of a shard publish its digest
// in round: by SHA-256 of the round (8 bytes, big-endian) and the peer
// ID, duplicates dropped. Every peer holding the same members derives the
// same order; each round draws it anew, so no member carries the load for
// long, and no member can choose to come first but by grinding identities
// (which a shard's membership, bound to the ID, already allows).
func Order(round int64, members []peer.ID) []peer.ID {
	type keyed struct {
		id  peer.ID
		key [32]byte
	}
	var r [8]byte
	binary.BigEndian.PutUint64(r[:], uint64(round))
	ks := make([]keyed, 0, len(members))
	for _, m := range members {
		h := sha256.New()
		h.Write(r[:])
		h.Write([]byte(m))
		var k keyed
		k.id = m
		h.Sum(k.key[:0])
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.id), []byte(b.id))
	})
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return a.id == b.id })
	out := make([]peer.ID, len(ks))
	for i, k := range ks {
		out[i] = k.id
	}
	return out
}
