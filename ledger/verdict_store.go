package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Verdicts are kept beside the chain, as leases' evidence is (leases.go):
// each proves itself with the submitter's signature, so it needs no place
// in the hash chain, and a ledger kept before verdicts were reads as one
// that holds none. A lease a kept verdict names as a loser is not owed
// (Policy.Bill).

// KeepVerdict verifies v and keeps it. Keeping the same verdict again is
// harmless.
func (l *Ledger) KeepVerdict(ctx context.Context, v Verdict) error {
	if err := v.Verify(); err != nil {
		return fmt.Errorf("keep verdict: %w", err)
	}
	b, err := MarshalVerdict(v)
	if err != nil {
		return fmt.Errorf("keep verdict: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("keep verdict on %s: %w", v.Job, err)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	d := v.digest()
	key := append([]byte(prefixVerdict), d[:]...)
	err = l.db.Update(func(txn *badger.Txn) error {
		_, err := txn.Get(key)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return txn.Set(key, b)
		case err != nil:
			return err
		}
		return nil // kept already: the same signed bytes
	})
	if err != nil {
		return fmt.Errorf("keep verdict on %s: %w", v.Job, err)
	}
	return nil
}

// Verdicts returns every verdict kept, by time, then job.
func (l *Ledger) Verdicts(ctx context.Context) ([]Verdict, error) {
	var out []Verdict
	err := l.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixVerdict), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(b []byte) error {
				v, err := UnmarshalVerdict(b)
				if err != nil {
					return fmt.Errorf("%w: kept verdict: %w", ErrCorrupt, err)
				}
				out = append(out, v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verdicts: %w", err)
	}
	slices.SortFunc(out, func(a, b Verdict) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Job, b.Job))
	})
	return out, nil
}

// withLost is p with the leases the kept verdicts name as losers added
// to its Lost set, so that Bill makes them not owed.
func (l *Ledger) withLost(ctx context.Context, p Policy) (Policy, error) {
	vs, err := l.Verdicts(ctx)
	if err != nil {
		return Policy{}, err
	}
	return p.WithLost(vs), nil
}
