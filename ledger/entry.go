package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Entry is a receipt as this node stored it: its place in the node's chain
// and the hash that ties it to every entry before it.
//
// An entry holds one of three things: a receipt both parties signed, a
// one-sided final record (Receipt.Signer set), or a dispute (Dispute set,
// Receipt zero).
type Entry struct {
	Index   uint64   `json:"index"` // 1 for the first entry, no gaps
	Receipt Receipt  `json:"receipt"`
	Dispute *Dispute `json:"dispute,omitempty"`
	Prev    string   `json:"prev"` // Hash of entry Index-1, "" for the first
	Hash    string   `json:"hash"` // see entryHash
	// Superseded is set by queries, not stored: the entry is a one-sided
	// record or a dispute of a lease that a two-sided final receipt later
	// settled. It stays in the chain, which is append-only.
	Superseded bool `json:"superseded,omitempty"`
}

// subject is the receipt that names the entry's lease, job and parties:
// the receipt itself, or this node's version of a disputed lease.
func (e *Entry) subject() *Receipt {
	if e.Dispute != nil {
		return &e.Dispute.Ours
	}
	return &e.Receipt
}

// entryDomain keeps the chain hash apart from every other SHA-256 in E31.
const entryDomain = "e31-entry/1\n"

// entryHash is sha256(domain ‖ prev ‖ index ‖ content), with the first entry's
// prev all zeros. content (see receiptContent) holds the signing bytes and
// both signatures, so editing a field, swapping a signature, moving an entry
// to another index or dropping one changes some hash downstream.
func entryHash(prev [32]byte, index uint64, content []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(entryDomain))
	h.Write(prev[:])
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	h.Write(ib[:])
	h.Write(content)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// receiptContent is the signing bytes followed by both signatures, each
// length-prefixed: everything that identifies a receipt and its evidence.
func receiptContent(signing, providerSig, submitterSig []byte) []byte {
	b := make([]byte, 0, len(signing)+len(providerSig)+len(submitterSig)+6)
	b = binary.AppendUvarint(b, uint64(len(signing)))
	b = append(b, signing...)
	b = binary.AppendUvarint(b, uint64(len(providerSig)))
	b = append(b, providerSig...)
	b = binary.AppendUvarint(b, uint64(len(submitterSig)))
	return append(b, submitterSig...)
}

// fixedDigest covers the fields every receipt of one lease must share.
// Receipts of a lease are cumulative: each restates the lease start, so a
// later seq may move HeldUntil forward but never these.
func fixedDigest(r *Receipt) [32]byte {
	b := appendString(nil, r.Job)
	b = appendString(b, string(r.Provider))
	b = appendString(b, string(r.Submitter))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.GPUs)))
	b = binary.BigEndian.AppendUint64(b, uint64(r.HeldFrom.UnixMilli()))
	return sha256.Sum256(b)
}

func hashHex(h [32]byte) string { return hex.EncodeToString(h[:]) }

// encodeEntry builds the stored form by hand rather than through
// encoding/json: the receipt JSON is already encoded by the caller of Append,
// off the single writer goroutine, and hex strings need no escaping. Verify
// rebuilds these bytes from the decoded entry and compares, so the stored
// form is canonical and no byte of it can change unnoticed.
//
// field is "receipt" (receipts and one-sided records) or "dispute".
func encodeEntry(index uint64, field string, body []byte, prev, hash string) []byte {
	b := make([]byte, 0, len(body)+200)
	b = append(b, `{"index":`...)
	b = strconv.AppendUint(b, index, 10)
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, body...)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...)
	b = append(b, `","hash":"`...)
	b = append(b, hash...)
	return append(b, `"}`...)
}

type storedEntry struct {
	Index   uint64       `json:"index"`
	Receipt *receiptJSON `json:"receipt"`
	Dispute *disputeJSON `json:"dispute"`
	Prev    string       `json:"prev"`
	Hash    string       `json:"hash"`
}

const (
	fieldReceipt = "receipt"
	fieldDispute = "dispute"
)

var errNotCanonical = errors.New("entry bytes are not in canonical form")

// decodeEntry parses stored entry bytes; pc may be nil. With canonical set it
// also rebuilds the bytes from what it parsed and refuses any difference,
// which catches every edit JSON would otherwise forgive (a field name's
// letter case, a repeated or unknown field, escapes, spacing).
func decodeEntry(data []byte, canonical bool, pc *peerText) (Entry, error) {
	var s storedEntry
	if err := json.Unmarshal(data, &s); err != nil {
		return Entry{}, fmt.Errorf("decode entry: %w", err)
	}
	e := Entry{Index: s.Index, Prev: s.Prev, Hash: s.Hash}
	var (
		field string
		body  func() ([]byte, error)
		err   error
	)
	switch {
	case s.Receipt != nil && s.Dispute == nil:
		field = fieldReceipt
		e.Receipt, err = s.Receipt.receipt(pc)
		if err == nil {
			err = e.Receipt.Validate()
		}
		body = func() ([]byte, error) {
			w := e.Receipt.wire(pc)
			return json.Marshal(&w)
		}
	case s.Dispute != nil && s.Receipt == nil:
		field = fieldDispute
		var d Dispute
		d, err = s.Dispute.dispute(pc)
		e.Dispute = &d
		body = func() ([]byte, error) {
			w := d.wire(pc)
			return json.Marshal(&w)
		}
	default:
		err = errors.New("entry holds neither a receipt nor a dispute, or both")
	}
	if err != nil {
		return Entry{}, fmt.Errorf("decode entry %d: %w", s.Index, err)
	}
	if canonical {
		b, err := body()
		if err != nil {
			return Entry{}, fmt.Errorf("re-encode entry %d: %w", s.Index, err)
		}
		if !bytes.Equal(encodeEntry(e.Index, field, b, e.Prev, e.Hash), data) {
			return Entry{}, fmt.Errorf("entry %d: %w", s.Index, errNotCanonical)
		}
	}
	return e, nil
}
