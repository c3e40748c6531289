package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

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
	l.lost.forget()
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
	lost, gen, ok := l.lost.get()
	if !ok {
		vs, err := l.Verdicts(ctx)
		if err != nil {
			return Policy{}, err
		}
		lost = Policy{}.WithLost(vs).Lost
		l.lost.put(lost, gen)
	}
	if len(p.Lost) == 0 {
		p.Lost = lost // read only, as every Policy's Lost is
		return p, nil
	}
	merged := make(map[string]bool, len(p.Lost)+len(lost))
	maps.Copy(merged, p.Lost)
	maps.Copy(merged, lost)
	p.Lost = merged
	return p, nil
}

// lostCache remembers the leases the kept verdicts name losers, so that
// summing the held time of each of an array's tasks (HeldByJobs) does not
// read every verdict for each. KeepVerdict forgets it, and a read that
// raced a KeepVerdict is not kept.
type lostCache struct {
	mu   sync.Mutex
	gen  uint64          // counts KeepVerdict calls
	lost map[string]bool // nil: not known
}

func (c *lostCache) get() (map[string]bool, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost, c.gen, c.lost != nil
}

// put keeps lost if no verdict was kept since gen.
func (c *lostCache) put(lost map[string]bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.lost = lost
	}
}

func (c *lostCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.lost = nil
}
