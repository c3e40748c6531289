package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/e31network/e31/content/badgerdb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Sentinel errors of the store.
var (
	// ErrConflict: Append was given a receipt that contradicts one already
	// stored: a different receipt for the same (lease, seq), a Prev that does
	// not match the stored predecessor, a second final receipt, or a receipt
	// after the final one.
	ErrConflict = errors.New("conflicts with a stored receipt")
	// ErrClosed: the ledger has been closed.
	ErrClosed = errors.New("ledger closed")
	// ErrCorrupt: a lookup index points at an entry that is missing or says
	// something else. Verify tells which entry is at fault.
	ErrCorrupt = errors.New("ledger store is inconsistent")
)

// Options configures Open. The zero value is a persistent ledger that logs
// nothing.
type Options struct {
	// Log receives the store's warnings and errors, and Badger's own messages
	// at debug level. Nil discards them.
	Log *slog.Logger
	// InMemory keeps everything in memory and ignores dir; for tests.
	InMemory bool
	// Self is this node's peer ID. Usage leaves it out as a counterpart
	// and counts its own jobs on its own GPUs apart (RoleSelf). Empty
	// lists both parties of every lease.
	Self peer.ID
}

// Sizes for a node rather than a database server (Badger's defaults assume
// the latter: 5 × 64 MiB memtables, a 256 MiB block cache, 1 GiB value logs).
// A memtable is resident as it fills, twice over (its arena and its
// mapped write-ahead log): 1 MiB holds several hundred receipts, and a
// group commit takes up to a tenth of it (60-80 receipts; half that
// costs a fifth more CPU per receipt). Without an index cache the few
// tables' indexes stay in memory.
const (
	memTableSize   = 1 << 20
	blockCacheSize = 1 << 20
	indexCacheSize = 0
	vlogFileSize   = 16 << 20
	// valueThreshold keeps every entry (≤ MaxReceiptSize plus chain fields)
	// in the LSM tree, so the value log is only a write-ahead log and never
	// needs garbage collection.
	valueThreshold = 64 << 10
	// maxTxnBytes stays under Badger's limit of 15 % of a memtable per
	// transaction, with margin for its per-key overhead, so a batch never
	// fails half-written with ErrTxnTooBig.
	maxTxnBytes = memTableSize / 10
	// maxBatch bounds how many Appends share one synced commit.
	maxBatch = 1024
)

// Ledger is a node's store of signed receipts. Each stored receipt becomes an
// Entry in a hash chain. All methods are safe for concurrent use.
type Ledger struct {
	// Set by Open, never changed.
	db         *badger.DB
	log        *slog.Logger
	self       peer.ID
	reqs       chan *appendReq // to the writer goroutine; closed by Close
	writerDone chan struct{}   // closed when the writer has returned
	keys       keyCache        // signers' keys, expanded for repeated checks
	held       heldCache       // HeldByJobs' counted leases, forgotten on commit
	lost       lostCache       // the leases kept verdicts name losers, forgotten on KeepVerdict

	mu     sync.RWMutex // held for reading by every operation, so Close waits for them
	closed bool         // guarded by mu

	// Written by the writer goroutine only.
	commits  atomic.Uint64 // synced transactions
	appended atomic.Uint64 // entries those transactions added
}

// Open opens (creating if needed) the ledger in dir. Badger runs with
// synchronous writes: Append returns only once its entry is on disk. ctx
// bounds the opening only; the ledger lives until Close.
func Open(ctx context.Context, dir string, o Options) (*Ledger, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var bo badger.Options
	if o.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if dir == "" {
			return nil, errors.New("open ledger: no directory given")
		}
		bo = badger.DefaultOptions(dir).WithSyncWrites(true)
	}
	bo = bo.WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		// Snappy halves the tables, and every table this node writes stays
		// resident in its mapping: the ledger grows with every lease, so
		// its tables cost more than a small cache of decompressed blocks.
		WithCompression(options.Snappy).
		WithBlockCacheSize(blockCacheSize).
		WithIndexCacheSize(indexCacheSize).
		WithValueLogFileSize(vlogFileSize).
		WithValueThreshold(valueThreshold).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		// Metrics are process-wide expvars in Badger; a node that opens
		// several stores, or a test that opens many, must not share them.
		WithMetricsEnabled(false).
		// One goroutine writes, so there is nothing to detect.
		WithDetectConflicts(false).
		WithLogger(badgerdb.NewLogger(log))
	db, err := badgerdb.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", dir, err)
	}
	var h chainHead
	err = db.View(func(txn *badger.Txn) error {
		h, err = readHead(txn)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", dir, err)
	}
	l := &Ledger{
		db:         db,
		log:        log,
		self:       o.Self,
		reqs:       make(chan *appendReq, maxBatch),
		writerDone: make(chan struct{}),
	}
	go l.write(h)
	return l, nil
}

// Close stops the writer once every Append already handed to it is stored,
// waits for reads in progress, and closes the store. Later calls on the
// ledger return ErrClosed; closing twice is harmless.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.reqs)
	l.mu.Unlock()
	<-l.writerDone
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// Head names the last entry of the chain; Index 0 is an empty ledger.
type Head struct {
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

// Head returns the last entry's index and hash as committed. A node can
// publish or note it so that a later truncation of its ledger shows.
func (l *Ledger) Head(ctx context.Context) (Head, error) {
	var h chainHead
	err := l.view(ctx, func(txn *badger.Txn) error {
		var err error
		h, err = readHead(txn)
		return err
	})
	if err != nil {
		return Head{}, fmt.Errorf("ledger head: %w", err)
	}
	if h.index == 0 {
		return Head{}, nil
	}
	return Head{Index: h.index, Hash: hashHex(h.hash)}, nil
}

// view runs fn in a read transaction while holding off Close.
func (l *Ledger) view(ctx context.Context, fn func(*badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.db.View(fn)
}

func readHead(txn *badger.Txn) (chainHead, error) {
	item, err := txn.Get([]byte(keyHead))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return chainHead{}, nil
	}
	if err != nil {
		return chainHead{}, fmt.Errorf("read head: %w", err)
	}
	var h chainHead
	err = item.Value(func(v []byte) error {
		h, err = decodeHead(v)
		return err
	})
	if err != nil {
		return chainHead{}, fmt.Errorf("read head: %w", err)
	}
	return h, nil
}
