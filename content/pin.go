package content

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Pin keeps a DAG from GC. A root has one pin per reason, so the input of
// two jobs can share a DAG and each job drops only its own pin.
type Pin struct {
	Root    cid.Cid
	Reasons []string
}

func pinKey(root cid.Cid, reason string) []byte {
	return key(kindPin, root.Bytes(), []byte{0}, []byte(reason))
}

func indexKey(block, root cid.Cid) []byte {
	return key(kindIndex, block.Hash(), root.Bytes())
}

// Pin pins the DAG under root for reason (for example "input of job X",
// "checkpoint 3 of lease Y"). The DAG must be complete: a pin is a promise
// that the data is here.
func (s *Store) Pin(ctx context.Context, root cid.Cid, reason string) error {
	if reason == "" {
		return errors.New("pin: empty reason")
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	sc, err := s.scan(ctx, root)
	if err != nil {
		return fmt.Errorf("pin %s: %w", root, err)
	}
	if len(sc.missing) > 0 {
		return fmt.Errorf("pin %s: %w: %d subtrees missing, first %s", root, ErrIncomplete, len(sc.missing), sc.missing[0])
	}
	return s.commit(root, sc.held, reason)
}

// commit records that the held blocks belong to root (the access index)
// and, if reason is not empty, pins root. The caller holds gcMu for reading
// and has checked that the DAG is complete.
func (s *Store) commit(root cid.Cid, held []cid.Cid, reason string) error {
	if err := s.sync(); err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, c := range held {
		if err := wb.Set(indexKey(c, root), nil); err != nil {
			return fmt.Errorf("index %s: %w", root, err)
		}
	}
	if reason != "" {
		if err := wb.Set(pinKey(root, reason), nil); err != nil {
			return fmt.Errorf("pin %s: %w", root, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index %s: %w", root, err)
	}
	if reason != "" {
		s.pinGen.Add(1)
	}
	return s.sync()
}

// Unpin removes the pin of root for reason. It returns ErrNotFound if there
// is no such pin. The blocks stay until GC.
func (s *Store) Unpin(ctx context.Context, root cid.Cid, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k := pinKey(root, reason)
	err := s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(k); err != nil {
			return err
		}
		return txn.Delete(k)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("unpin %s (%q): %w", root, reason, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("unpin %s: %w", root, err)
	}
	s.pinGen.Add(1)
	return s.sync()
}

// PinGeneration changes whenever a pin is added or removed: a caller that
// summarizes Pins need not list them again while it stays the same.
func (s *Store) PinGeneration() uint64 { return s.pinGen.Load() }

// Pins lists every pinned root with its reasons, ordered by root bytes.
func (s *Store) Pins(ctx context.Context) ([]Pin, error) {
	var pins []Pin
	err := s.scanPrefix(ctx, []byte{kindPin, '/'}, func(k []byte) error {
		rest := k[2:]
		n, root, err := cid.CidFromBytes(rest)
		if err != nil || n >= len(rest) || rest[n] != 0 {
			return fmt.Errorf("%w: malformed pin key %x", ErrInvalidData, k)
		}
		reason := string(rest[n+1:])
		if len(pins) > 0 && pins[len(pins)-1].Root == root {
			pins[len(pins)-1].Reasons = append(pins[len(pins)-1].Reasons, reason)
			return nil
		}
		pins = append(pins, Pin{Root: root, Reasons: []string{reason}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	return pins, nil
}

// rootsOf calls fn with each root whose DAG the block behind c was recorded
// in, until fn returns true; it reports whether one did.
func (s *Store) rootsOf(ctx context.Context, c cid.Cid, fn func(root cid.Cid) bool) (bool, error) {
	prefix := key(kindIndex, c.Hash())
	var found bool
	errStop := errors.New("stop")
	err := s.scanPrefix(ctx, prefix, func(k []byte) error {
		root, err := cid.Cast(k[len(prefix):])
		if err != nil {
			return nil // not ours to judge here; GC drops it
		}
		if fn(root) {
			found = true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, fmt.Errorf("roots of %s: %w", c, err)
	}
	return found, nil
}

// GC deletes every block that no pinned DAG reaches, and the access index
// entries of unpinned roots, then lets Badger reclaim value-log space. It
// returns the number of blocks deleted.
//
// GC runs only while no import or fetch is in progress, so a DAG being
// written is never collected before its pin lands. It waits for that by
// polling rather than by blocking on the lock: a blocked writer lock would
// stall every new import and fetch behind a long transfer already running.
func (s *Store) GC(ctx context.Context) (int, error) {
	for !s.gcMu.TryLock() {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("gc: waiting for transfers to finish: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer s.gcMu.Unlock()

	pins, err := s.Pins(ctx)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	live := map[string]struct{}{}
	pinned := map[cid.Cid]struct{}{}
	for _, p := range pins {
		pinned[p.Root] = struct{}{}
		sc, err := s.scan(ctx, p.Root)
		if err != nil {
			// Marking must be complete or GC would delete live data.
			return 0, fmt.Errorf("gc: mark %s: %w", p.Root, err)
		}
		if len(sc.missing) > 0 {
			s.log.Warn("pinned DAG is incomplete", "root", p.Root, "missing", len(sc.missing))
		}
		for _, c := range sc.held {
			live[string(c.Hash())] = struct{}{}
		}
	}

	// Size records go before block bytes, so a block is never seen as
	// held without its bytes, even if the batch is split.
	var sizeDels, blockDels [][]byte
	removed := 0
	dead := map[string]struct{}{}
	deadSpans := map[uint32][]packSpan{}
	livePacks := map[uint32]bool{}
	err = s.scanSizes(ctx, func(h []byte, n int, loc *packLoc) error {
		if _, ok := live[string(h)]; ok {
			if loc != nil {
				livePacks[loc.pack] = true
			}
			return nil
		}
		dead[string(h)] = struct{}{}
		sizeDels = append(sizeDels, key(kindSize, h))
		if loc != nil {
			deadSpans[loc.pack] = append(deadSpans[loc.pack], packSpan{off: loc.off, n: alignUp(int64(n))})
		} else {
			blockDels = append(blockDels, key(kindBlock, h))
		}
		removed++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gc: sweep blocks: %w", err)
	}
	// Bytes without a size record: a write cut short by a crash.
	err = s.scanPrefix(ctx, []byte{kindBlock, '/'}, func(k []byte) error {
		h := k[2:]
		if _, ok := live[string(h)]; ok {
			return nil
		}
		if _, ok := dead[string(h)]; !ok {
			blockDels = append(blockDels, k)
			removed++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gc: sweep blocks: %w", err)
	}
	dels := append(sizeDels, blockDels...)
	err = s.scanPrefix(ctx, []byte{kindIndex, '/'}, func(k []byte) error {
		rest := k[2:]
		n, _, err := mh.MHFromBytes(rest)
		if err != nil {
			dels = append(dels, k)
			return nil
		}
		root, err := cid.Cast(rest[n:])
		_, blockLive := live[string(rest[:n])]
		_, rootPinned := pinned[root]
		if err != nil || !blockLive || !rootPinned {
			dels = append(dels, k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gc: sweep index: %w", err)
	}
	if err := s.deleteKeys(dels); err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	if err := s.sync(); err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	if s.packs != nil {
		// Only now that no record names them can the bytes go.
		if err := s.packs.free(deadSpans, livePacks); err != nil {
			s.log.Warn("gc: free pack space", "err", err)
		}
	}
	s.compactValueLog()
	s.log.Debug("gc done", "pins", len(pins), "removed", removed)
	return removed, nil
}

// compactValueLog rewrites value-log files that are mostly garbage. Badger
// never does this by itself.
func (s *Store) compactValueLog() {
	for range 100 { // bounded: each round rewrites at most one file
		err := s.db.RunValueLogGC(0.5)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrGCInMemoryMode) {
			s.log.Warn("value log gc", "err", err)
		}
		return
	}
}
