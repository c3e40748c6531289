package ledger

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Key layout. Integers are big-endian so that Badger's byte order is numeric
// order; variable-length parts (IDs) are length-prefixed so that no ID can be
// the prefix of another's key.
//
//	e/<index>                     entry JSON: index, prev, hash, receipt
//	h                             head: <index><hash 32>
//	l/<len><lease><seq>           leaseState (see below)
//	f/<len><lease>                <seq> of the lease's final receipt
//	o/<len><lease><index>         sha256 of a one-sided record's entry content
//	d/<len><lease><index>         sha256 of a dispute's entry content
//	j/<len><job><index>           empty
//	p/<len><peer><index>          empty; one per party of the receipt
//	t/<held_until ms><index>      empty
//	v/<len><lease>                the lease's evidence (leases.go), beside the chain
//	w/<sha256 of signing bytes>   a verdict (verdict_store.go), beside the chain
//
// Receipts both parties signed have l/ (and f/) keys; one-sided records
// have o/ keys and disputes d/ keys instead, so that the l/ keys of a lease
// are exactly its chain of two-sided receipts. Disputes have no t/ key.
//
// Only e/ and h carry the chain; every other key is derived from entries and
// serves lookups, so Ledger.Verify does not rely on them.
const (
	prefixEntry         = "e/"
	prefixLease         = "l/"
	prefixFinal         = "f/"
	prefixJob           = "j/"
	prefixPeer          = "p/"
	prefixTime          = "t/"
	prefixOne           = "o/"
	prefixDisp          = "d/"
	prefixLeaseEvidence = "v/"
	prefixVerdict       = "w/"
	keyHead             = "h"
)

func evidenceKey(lease string) []byte { return appendVarString([]byte(prefixLeaseEvidence), lease) }

func entryKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixEntry), index)
}

// indexFromKey reads the trailing index of an e/, j/, p/ or t/ key.
func indexFromKey(key []byte) (uint64, bool) {
	if len(key) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(key)-8:]), true
}

func appendVarString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func leasePrefix(lease string) []byte { return appendVarString([]byte(prefixLease), lease) }

func leaseKey(lease string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(leasePrefix(lease), seq)
}

func finalKey(lease string) []byte { return appendVarString([]byte(prefixFinal), lease) }

func sidePrefix(kind entryKind, lease string) []byte {
	if kind == kindDispute {
		return appendVarString([]byte(prefixDisp), lease)
	}
	return appendVarString([]byte(prefixOne), lease)
}

func jobPrefix(job string) []byte { return appendVarString([]byte(prefixJob), job) }

func jobKey(job string, index uint64) []byte {
	return binary.BigEndian.AppendUint64(jobPrefix(job), index)
}

func peerPrefix(p peer.ID) []byte { return appendVarString([]byte(prefixPeer), string(p)) }

func peerKey(p peer.ID, index uint64) []byte {
	return binary.BigEndian.AppendUint64(peerPrefix(p), index)
}

func timeKey(t time.Time, index uint64) []byte {
	b := binary.BigEndian.AppendUint64([]byte(prefixTime), uint64(t.UnixMilli()))
	return binary.BigEndian.AppendUint64(b, index)
}

// chainHead is the last entry of the chain; the zero head is the empty ledger.
type chainHead struct {
	index uint64
	hash  [32]byte
}

func (h chainHead) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 40), h.index)
	return append(b, h.hash[:]...)
}

func decodeHead(b []byte) (chainHead, error) {
	if len(b) != 40 {
		return chainHead{}, errors.New("head record is not 40 bytes")
	}
	var h chainHead
	h.index = binary.BigEndian.Uint64(b)
	copy(h.hash[:], b[8:])
	return h, nil
}

// leaseState is what the single writer needs to know about a stored receipt
// to check a new one of the same lease, kept beside the lease key so that
// the check costs a key lookup rather than decoding the stored JSON.
type leaseState struct {
	index     uint64
	digest    [32]byte // sha256 of SigningBytes: what the next seq puts in Prev
	prev      [32]byte // the receipt's own Prev, decoded; zero for seq 0
	content   [32]byte // sha256 of SigningBytes and both signatures: identity for idempotency
	fixed     [32]byte // sha256 of the fields every receipt of a lease shares
	heldUntil int64    // ms
	final     bool
}

const leaseStateLen = 8 + 32*4 + 8 + 1

func (s *leaseState) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, leaseStateLen), s.index)
	b = append(b, s.digest[:]...)
	b = append(b, s.prev[:]...)
	b = append(b, s.content[:]...)
	b = append(b, s.fixed[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.heldUntil))
	return appendBool(b, s.final)
}

func decodeLeaseState(b []byte) (leaseState, error) {
	if len(b) != leaseStateLen {
		return leaseState{}, errors.New("lease record has the wrong length")
	}
	var s leaseState
	s.index = binary.BigEndian.Uint64(b)
	copy(s.digest[:], b[8:])
	copy(s.prev[:], b[40:])
	copy(s.content[:], b[72:])
	copy(s.fixed[:], b[104:])
	s.heldUntil = int64(binary.BigEndian.Uint64(b[136:]))
	s.final = b[144] == 1
	return s, nil
}

func encodeUint64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func decodeUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
