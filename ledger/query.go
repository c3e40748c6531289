package ledger

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ctxCheckEvery is how many keys a scan reads between looks at its context.
const ctxCheckEvery = 256

// ByJob returns the entries of every lease of a job, in ledger order.
func (l *Ledger) ByJob(ctx context.Context, job string) ([]Entry, error) {
	es, err := l.scanIndex(ctx, jobPrefix(job), nil, nil, func(e *Entry) bool { return e.subject().Job == job })
	if err != nil {
		return nil, fmt.Errorf("receipts of job %s: %w", job, err)
	}
	return es, nil
}

// ByPeer returns the entries in which p is provider or submitter, in ledger
// order.
func (l *Ledger) ByPeer(ctx context.Context, p peer.ID) ([]Entry, error) {
	es, err := l.scanIndex(ctx, peerPrefix(p), nil, nil, func(e *Entry) bool {
		r := e.subject()
		return r.Provider == p || r.Submitter == p
	})
	if err != nil {
		return nil, fmt.Errorf("receipts with peer %s: %w", p, err)
	}
	return es, nil
}

// ByLease returns a lease's receipts signed by both parties, in seq order:
// the lease's chain, without its one-sided records and disputes (see
// Lease for those and for how the lease stands).
func (l *Ledger) ByLease(ctx context.Context, lease string) ([]Entry, error) {
	var es []Entry
	err := l.view(ctx, func(txn *badger.Txn) error {
		prefix := leasePrefix(lease)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		var indexes []uint64
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				s, err := decodeLeaseState(v)
				if err != nil {
					return fmt.Errorf("%w: %w", ErrCorrupt, err)
				}
				indexes = append(indexes, s.index)
				return nil
			})
			if err != nil {
				return err
			}
		}
		var err error
		es, err = loadEntries(ctx, txn, indexes, func(e *Entry) bool { return e.Receipt.Lease == lease })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("receipts of lease %s: %w", lease, err)
	}
	return es, nil
}

// All returns every entry in ledger order.
func (l *Ledger) All(ctx context.Context) ([]Entry, error) {
	var es []Entry
	err := l.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixEntry), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		pc := newPeerText()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var e Entry
			err := it.Item().Value(func(v []byte) error {
				var err error
				e, err = decodeEntry(v, false, pc)
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: key %x: %w", ErrCorrupt, it.Item().Key(), err)
			}
			if err := markSuperseded(txn, &e); err != nil {
				return err
			}
			es = append(es, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("all receipts: %w", err)
	}
	return es, nil
}

// scanIndex reads the entry index at the end of every key under prefix, from
// start (nil: the first) up to but excluding stop (nil: the last), and loads
// those entries. match guards against a lookup key that no longer agrees with
// its entry: lookup keys are outside the hash chain, so a query re-checks
// them.
func (l *Ledger) scanIndex(ctx context.Context, prefix, start, stop []byte, match func(*Entry) bool) ([]Entry, error) {
	var es []Entry
	err := l.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		var indexes []uint64
		if start == nil {
			start = prefix
		}
		n := 0
		for it.Seek(start); it.Valid(); it.Next() {
			if n++; n%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			k := it.Item().Key()
			if stop != nil && bytes.Compare(k, stop) >= 0 {
				break
			}
			index, ok := indexFromKey(k[len(prefix):])
			if !ok {
				return fmt.Errorf("%w: short index key %x", ErrCorrupt, k)
			}
			indexes = append(indexes, index)
		}
		var err error
		es, err = loadEntries(ctx, txn, indexes, match)
		return err
	})
	return es, err
}

func loadEntries(ctx context.Context, txn *badger.Txn, indexes []uint64, match func(*Entry) bool) ([]Entry, error) {
	es := make([]Entry, 0, len(indexes))
	for i, index := range indexes {
		if i%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		e, err := loadEntry(txn, index)
		if err != nil {
			return nil, err
		}
		if !match(&e) {
			return nil, fmt.Errorf("%w: lookup key points at entry %d, which does not match", ErrCorrupt, index)
		}
		if err := markSuperseded(txn, &e); err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

// markSuperseded sets e.Superseded on a one-sided record or dispute whose
// lease has a two-sided final receipt.
func markSuperseded(txn *badger.Txn, e *Entry) error {
	if e.Dispute == nil && !e.Receipt.OneSided() {
		return nil
	}
	_, settled, err := getUint64(txn, finalKey(e.subject().Lease))
	e.Superseded = settled
	return err
}

// Settlement is how a lease stands in the ledger.
type Settlement string

const (
	// SettlementNone: nothing is stored for the lease.
	SettlementNone Settlement = "none"
	// SettlementOpen: receipts both parties signed, none final yet; the
	// lease runs, or its end is not on record here.
	SettlementOpen Settlement = "open"
	// SettlementTwoSided: a final receipt both parties signed ends the
	// lease; any one-sided record or dispute before it is superseded.
	SettlementTwoSided Settlement = "two-sided"
	// SettlementOneSided: the lease ends in a record one party signed.
	SettlementOneSided Settlement = "one-sided"
	// SettlementDisputed: the parties' versions of the end differ, and both
	// are on record.
	SettlementDisputed Settlement = "disputed"
)

// LeaseRecord is everything the ledger holds on one lease.
type LeaseRecord struct {
	Lease    string
	State    Settlement
	Receipts []Entry // signed by both parties, in seq order
	OneSided []Entry // one-sided final records, in ledger order
	Disputes []Entry // disputes, in ledger order
}

// Counted is the receipt the lease's held time is taken from: the
// two-sided final receipt; else, in a dispute, this node's version; else
// the last one-sided record; else the latest two-sided interim receipt.
// Nil when nothing is stored.
func (lr *LeaseRecord) Counted() *Receipt {
	n := len(lr.Receipts)
	switch lr.State {
	case SettlementTwoSided, SettlementOpen:
		return &lr.Receipts[n-1].Receipt
	case SettlementDisputed:
		return &lr.Disputes[len(lr.Disputes)-1].Dispute.Ours
	case SettlementOneSided:
		return &lr.OneSided[len(lr.OneSided)-1].Receipt
	}
	return nil
}

// add files e under the lease's lists.
func (lr *LeaseRecord) add(e Entry) {
	switch {
	case e.Dispute != nil:
		lr.Disputes = append(lr.Disputes, e)
	case e.Receipt.OneSided():
		lr.OneSided = append(lr.OneSided, e)
	default:
		lr.Receipts = append(lr.Receipts, e)
	}
}

// settle works out State once every entry is added, and marks what a
// two-sided final receipt superseded.
func (lr *LeaseRecord) settle() {
	slices.SortFunc(lr.Receipts, func(a, b Entry) int { return cmp.Compare(a.Receipt.Seq, b.Receipt.Seq) })
	final := len(lr.Receipts) > 0 && lr.Receipts[len(lr.Receipts)-1].Receipt.Final
	switch {
	case final:
		lr.State = SettlementTwoSided
	case len(lr.Disputes) > 0:
		lr.State = SettlementDisputed
	case len(lr.OneSided) > 0:
		lr.State = SettlementOneSided
	case len(lr.Receipts) > 0:
		lr.State = SettlementOpen
	default:
		lr.State = SettlementNone
	}
	for _, es := range [][]Entry{lr.OneSided, lr.Disputes} {
		for i := range es {
			es[i].Superseded = final
		}
	}
}

// Lease returns everything stored on a lease and how it stands: settled by
// a two-sided final receipt, ended by a one-sided record, disputed, or
// still open.
func (l *Ledger) Lease(ctx context.Context, lease string) (LeaseRecord, error) {
	lr := LeaseRecord{Lease: lease}
	err := l.view(ctx, func(txn *badger.Txn) error {
		var indexes []uint64
		for _, prefix := range [][]byte{leasePrefix(lease), sidePrefix(kindOneSided, lease), sidePrefix(kindDispute, lease)} {
			two := prefix[0] == prefixLease[0]
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				if !two {
					index, _ := indexFromKey(item.Key())
					indexes = append(indexes, index)
					continue
				}
				err := item.Value(func(v []byte) error {
					s, err := decodeLeaseState(v)
					indexes = append(indexes, s.index)
					return err
				})
				if err != nil {
					it.Close()
					return fmt.Errorf("%w: %w", ErrCorrupt, err)
				}
			}
			it.Close()
		}
		slices.Sort(indexes)
		es, err := loadEntries(ctx, txn, indexes, func(e *Entry) bool { return e.subject().Lease == lease })
		for _, e := range es {
			lr.add(e)
		}
		return err
	})
	if err != nil {
		return LeaseRecord{}, fmt.Errorf("lease %s: %w", lease, err)
	}
	lr.settle()
	return lr, nil
}

// Roles a counterpart can have played in Usage.
const (
	RoleProvider  = "provider"  // the peer provided GPUs
	RoleSubmitter = "submitter" // the peer submitted the job
	// RoleSelf marks, in Usage, this node's own jobs run on its own GPUs:
	// held time, but owed by no one.
	RoleSelf = "self"
)
