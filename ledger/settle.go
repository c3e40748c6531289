package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// AppendOneSided stores a one-sided final record: where the other party of
// a lease vanished before it could countersign, the survivor signs the end
// of the lease as it saw it (r.Signer, SignOneSided), with the lease both
// signed as evidence. The record must verify (its signature and the lease
// evidence), and when Options.Self is set its signer must be this node: a
// counterpart's record is kept only inside a dispute.
//
// A lease can hold several one-sided records (a survivor that restarted and
// saw more); the last counts. A lease already settled by a two-sided final
// receipt refuses one with ErrConflict. Storing the same record twice
// returns the first entry.
func (l *Ledger) AppendOneSided(ctx context.Context, r Receipt) (Entry, error) {
	what := fmt.Sprintf("append one-sided record of lease %s", r.Lease)
	if !r.OneSided() {
		return Entry{}, fmt.Errorf("%s: %w: no signer named", what, ErrInvalidReceipt)
	}
	if l.self != "" && r.signerID() != l.self {
		return Entry{}, fmt.Errorf("%s: %w: signed by the %s, not by this node", what, ErrWrongKey, r.Signer)
	}
	p, err := l.prepare(r)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	return l.submit(ctx, p, what)
}

// RecordDispute stores that the parties of a lease hold different versions
// of its end: ours, this node's, and theirs, the counterpart's, each a
// final receipt signed by its party alone (see Dispute). It is what a node
// does instead of countersigning a version it disagrees with, or of
// overwriting its own: both stay on record. When Options.Self is set, ours
// must be signed by this node and theirs by the other party.
//
// A lease already settled by a two-sided final receipt refuses a dispute
// with ErrConflict; a later two-sided final receipt still settles a
// disputed lease. Recording the same dispute twice returns the first entry.
func (l *Ledger) RecordDispute(ctx context.Context, lease string, ours, theirs Receipt) (Entry, error) {
	what := fmt.Sprintf("record dispute of lease %s", lease)
	d := Dispute{Lease: lease, Ours: clean(ours), Theirs: clean(theirs)}
	p, err := l.prepareDispute(&d)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	return l.submit(ctx, p, what)
}

func (l *Ledger) prepareDispute(d *Dispute) (*prepared, error) {
	ours, err := versionSigner(&d.Ours)
	if err != nil {
		return nil, fmt.Errorf("our version: %w", err)
	}
	theirs, err := versionSigner(&d.Theirs)
	if err != nil {
		return nil, fmt.Errorf("their version: %w", err)
	}
	if err := d.check(ours, theirs); err != nil {
		return nil, err
	}
	if l.self != "" && roleID(&d.Ours, ours) != l.self {
		return nil, fmt.Errorf("%w: our version is signed by the %s, not by this node", ErrWrongKey, ours)
	}
	w := d.wire(nil)
	dj, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("encode dispute: %w", err)
	}
	content := d.content()
	p := &prepared{
		kind:    kindDispute,
		r:       d.Ours,
		d:       d,
		json:    dj,
		content: content,
	}
	p.state.content = sha256.Sum256(content)
	p.estimate = len(dj) + 200 + 5*(64+len(d.Lease)+len(d.Ours.Job)+len(d.Ours.Provider))
	return p, nil
}

func roleID(r *Receipt, role Signer) peer.ID {
	if role == SignerSubmitter {
		return r.Submitter
	}
	return r.Provider
}

// applySide writes a one-sided record or a dispute: no seq chain to fit,
// only the lease's settlement to respect and a stored twin to return.
func (l *Ledger) applySide(txn *badger.Txn, h *chainHead, p *prepared) (Entry, bool, error) {
	r := &p.r
	prefix := sidePrefix(p.kind, r.Lease)
	index, found, err := findContent(txn, prefix, p.state.content)
	if err != nil {
		return Entry{}, false, err
	}
	if found {
		e, err := loadEntry(txn, index)
		return e, false, err
	}
	if seq, settled, err := getUint64(txn, finalKey(r.Lease)); err != nil {
		return Entry{}, false, err
	} else if settled {
		return Entry{}, false, fmt.Errorf("%w: the lease is settled by the two-sided final receipt seq %d", ErrConflict, seq)
	}

	index = h.index + 1
	hash := entryHash(h.hash, index, p.content)
	e := Entry{Index: index, Receipt: p.r, Hash: hashHex(hash)}
	if p.kind == kindDispute {
		e.Receipt, e.Dispute = Receipt{}, p.d
	}
	if h.index > 0 {
		e.Prev = hashHex(h.hash)
	}
	sets := [][2][]byte{
		{entryKey(index), encodeEntry(index, p.kind.field(), p.json, e.Prev, e.Hash)},
		{appendIndex(prefix, index), p.state.content[:]},
		{jobKey(r.Job, index), nil},
		{peerKey(r.Provider, index), nil},
	}
	if r.Submitter != r.Provider {
		sets = append(sets, [2][]byte{peerKey(r.Submitter, index), nil})
	}
	if p.kind == kindOneSided {
		sets = append(sets, [2][]byte{timeKey(r.HeldUntil, index), nil})
	}
	for _, kv := range sets {
		if err := txn.Set(kv[0], kv[1]); err != nil {
			return Entry{}, true, fmt.Errorf("write entry %d: %w", index, err)
		}
	}
	h.index, h.hash = index, hash
	return e, true, nil
}

// findContent looks among a lease's o/ or d/ keys for an entry with the
// given content digest.
func findContent(txn *badger.Txn, prefix []byte, content [32]byte) (uint64, bool, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		same := false
		if err := item.Value(func(v []byte) error {
			same = bytes.Equal(v, content[:])
			return nil
		}); err != nil {
			return 0, false, fmt.Errorf("read %x: %w", item.Key(), err)
		}
		if same {
			index, ok := indexFromKey(item.Key())
			if !ok {
				return 0, false, fmt.Errorf("%w: short key %x", ErrCorrupt, item.Key())
			}
			return index, true, nil
		}
	}
	return 0, false, nil
}

func appendIndex(prefix []byte, index uint64) []byte {
	return append(bytes.Clone(prefix), encodeUint64(index)...)
}
