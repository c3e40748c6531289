package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// The leases a node signed, kept beside the chain: each lease's evidence,
// the terms both parties signed, stored when the lease is countersigned and
// before any receipt of it. Append checks each receipt against its lease's
// terms (CheckHeld), Verify checks the chain against them, and Export
// writes them with the receipts, so that a third party can check the held
// time too. The evidence proves itself (both signatures over the terms), so
// it needs no place in the hash chain: a ledger whose evidence was removed
// verifies as one kept before leases were, its receipts counted unbounded.

// KeepLease stores the evidence of a lease both parties signed, after
// checking both signatures. Keeping the same evidence again is harmless;
// other evidence under the same lease ID is refused with ErrConflict.
func (l *Ledger) KeepLease(ctx context.Context, ev LeaseEvidence) error {
	t, err := ev.verify()
	if err != nil {
		return fmt.Errorf("keep lease: %w", err)
	}
	b := ev.marshal()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("keep lease %s: %w", t.ID, err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	key := evidenceKey(t.ID)
	return l.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return txn.Set(key, b)
		case err != nil:
			return fmt.Errorf("keep lease %s: %w", t.ID, err)
		}
		return item.Value(func(v []byte) error {
			if !bytes.Equal(v, b) {
				return fmt.Errorf("keep lease %s: %w: other terms are kept under its ID", t.ID, ErrConflict)
			}
			return nil
		})
	})
}

// marshal is the evidence's JSON, its terms as a string (evidenceJSON).
func (e *LeaseEvidence) marshal() json.RawMessage {
	b, _ := json.Marshal(evidenceJSON{Terms: string(e.Terms), ProviderSig: e.ProviderSig, SubmitterSig: e.SubmitterSig})
	return b // strings and byte slices always encode
}

// KeptLease returns the evidence kept for a lease, ok false when none is.
func (l *Ledger) KeptLease(ctx context.Context, lease string) (ev LeaseEvidence, ok bool, err error) {
	err = l.view(ctx, func(txn *badger.Txn) error {
		ev, ok, err = keptLease(txn, lease)
		return err
	})
	return ev, ok, err
}

// keptLease reads a lease's evidence in txn, unverified: KeepLease checked
// it, and Verify checks it again.
func keptLease(txn *badger.Txn, lease string) (LeaseEvidence, bool, error) {
	item, err := txn.Get(evidenceKey(lease))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return LeaseEvidence{}, false, nil
	}
	if err != nil {
		return LeaseEvidence{}, false, fmt.Errorf("read lease %s: %w", lease, err)
	}
	var w evidenceJSON
	if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &w) }); err != nil {
		return LeaseEvidence{}, false, fmt.Errorf("read lease %s: %w", lease, err)
	}
	return LeaseEvidence{Terms: json.RawMessage(w.Terms), ProviderSig: w.ProviderSig, SubmitterSig: w.SubmitterSig}, true, nil
}

// checkKept checks r against its lease's kept evidence, if any: a receipt
// the lease does not allow is refused before it reaches the chain.
func (l *Ledger) checkKept(ctx context.Context, r *Receipt) error {
	ev, ok, err := l.KeptLease(ctx, r.Lease)
	if err != nil || !ok {
		return err
	}
	t, err := ev.Parse()
	if err != nil {
		return err
	}
	return CheckHeld(r, t)
}
