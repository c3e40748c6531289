// Package state persists a node's own records (the jobs it submitted, the
// leases it provides, the peers it has seen) in Badger, so that a restart
// resumes them. Every write is synced: a job accepted or a lease signed must
// survive a crash the instant the peer is told.
//
// The store has no lock of its own beyond Badger's; callers write outside
// their own locks (see node/provider and node/submitter).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/e31network/e31/content/badgerdb"
)

// Store is a node's record store.
type Store struct {
	db *badger.DB
}

// Record prefixes: each names one kind of record and the package that owns
// it.
const (
	PrefixJob   = "job/"   // a job this node submitted (node/submitter)
	PrefixLease = "lease/" // a lease this node provides (node/provider)
	PrefixPeer  = "peer/"  // a provider this node has seen (node)
	PrefixDrain = "drain/" // this node drained by its owner (node/provider)
	// PrefixStrike: a submitter this node's provider struck off (node/provider).
	PrefixStrike = "strike/"
	// PrefixDistrust: a provider that lost a check of results on this
	// node's jobs (node/submitter).
	PrefixDistrust = "distrust/"
	// PrefixSecret: the values of the secrets of a job this node submitted,
	// apart from its record, until it has ended for good (node/submitter).
	PrefixSecret = "secret/"
)

// Open opens (or creates) the store in dir.
func Open(dir string, log *slog.Logger) (*Store, error) {
	db, err := badgerdb.Open(badgerOptions(dir, log))
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Sizes of the store. A node holds a few thousand records of a few KiB,
// rewritten a handful of times each over a job's life: a database sized
// for that, not for a server. What a busy node's memory settles at is set
// by what Badger keeps per open memtable (an arena in the heap and a mapped
// write-ahead log of twice its size, both resident as they fill) and by
// its caches.
const (
	memTableSize = 512 << 10
	// valueThreshold keeps every ordinary record (a few KiB) in the LSM
	// tree; one that carries a declaration near its 64 KiB bound goes to
	// the value log. Badger refuses a threshold above its largest batch,
	// 15% of a memtable (78 KiB here).
	valueThreshold = 64 << 10
	vlogFileSize   = 16 << 20
)

func badgerOptions(dir string, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(vlogFileSize).
		// Uncompressed tables are read in place from their mapped files;
		// compressed ones are decompressed into heap buffers and need a
		// block cache to hold them. Records are small JSON: the disk they
		// would save is not worth the memory.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		// With no index cache every table's index stays in memory: a few
		// KiB for a store this size.
		WithIndexCacheSize(0).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		// Writes are blind sets and deletes: no transaction reads what
		// another writes, so there is nothing to detect.
		WithDetectConflicts(false).
		// Badger's metrics are process-wide expvars; the node's other
		// stores must not share them.
		WithMetricsEnabled(false).
		WithLogger(badgerdb.NewLogger(log))
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Put stores v as JSON under prefix+id, synced.
func (s *Store) Put(prefix, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(prefix+id), b) }); err != nil {
		return fmt.Errorf("save %s%s: %w", prefix, id, err)
	}
	return nil
}

// An Item is one record of a PutAll.
type Item struct {
	ID    string
	Value any
}

// PutAll stores each item as JSON under prefix+ID in batches, synced once
// at the end rather than once a record: an array's ten thousand task
// records are written in the time of a few.
func (s *Store) PutAll(prefix string, items []Item) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, it := range items {
		b, err := json.Marshal(it.Value)
		if err != nil {
			return err
		}
		if err := wb.Set([]byte(prefix+it.ID), b); err != nil {
			return fmt.Errorf("save %s%s: %w", prefix, it.ID, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("save %d records under %s: %w", len(items), prefix, err)
	}
	return nil
}

// Get loads the record under prefix+id into v; false if there is none.
func (s *Store) Get(prefix, id string, v any) (bool, error) {
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(prefix + id))
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { return json.Unmarshal(b, v) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Each calls fn with every record under prefix, in key order.
func (s *Store) Each(prefix string, fn func(b []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete removes the record under prefix+id.
func (s *Store) Delete(prefix, id string) error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(prefix + id)) }); err != nil {
		return fmt.Errorf("delete %s%s: %w", prefix, id, err)
	}
	return nil
}
