package content

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/e31network/e31/content/badgerdb"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// StoreOptions configures Open. The zero value is a usable on-disk store
// that logs nowhere.
type StoreOptions struct {
	// Log receives Badger's warnings and the store's own notes.
	// nil discards them.
	Log *slog.Logger
	// InMemory keeps everything in memory (dir is ignored); for tests.
	InMemory bool
	// Room, when set, is asked before each batch of blocks is written
	// whether the disk has room for that many more bytes; an error stops
	// the write with ErrNoRoom (room.go). Nil: always.
	Room func(bytes int64) error
}

// Store is a content-addressed block store on Badger holding UnixFS DAGs,
// their pins, and the index of which roots each block belongs to.
//
// Key layout in Badger (one byte of kind, then '/'):
//
//	b/<multihash>            block bytes of a block kept in Badger
//	s/<multihash>            block size, 4 bytes big-endian; written after
//	                         b/ and deleted before it, so its presence means
//	                         the block is there. For a block in a pack file
//	                         (packs.go) 16 bytes: size, pack number, offset,
//	                         written only once the pack is synced, and no b/
//	p/<root cid><0><reason>  a pin; the value is empty
//	r/<multihash><root cid>  the block belongs to the DAG of root (access index)
//
// Blocks are keyed by multihash, as in boxo, so one copy serves a raw and a
// dag-pb CID of the same bytes. Sizes live apart from the bytes because
// Badger can only estimate the size of a value stored in its value log, and
// presence checks should not touch the value log at all.
//
// Blocks of packMinBlock bytes or more written through a blockWriter
// (imports and fetches) go to pack files instead of Badger; see packs.
type Store struct {
	db    *badger.DB // immutable after Open
	packs *packs     // immutable after Open; nil in memory
	log   *slog.Logger
	bufs  sync.Pool // of *[]byte, maxBlockSize each, for reads from packs
	// room is StoreOptions.Room; immutable after Open.
	room func(int64) error

	// gcMu orders GC against writers that end in a pin: Import, Fetch and
	// Pin hold it for reading from their first block write until their pin
	// lands, GC holds it for writing, so GC never sees a DAG half-written
	// and not yet pinned.
	gcMu sync.RWMutex

	// pinGen counts changes to the set of pins (PinGeneration).
	pinGen atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

const (
	kindBlock = 'b'
	kindSize  = 's'
	kindPin   = 'p'
	kindIndex = 'r'

	// maxBlockSize bounds any block we accept or create. The importer
	// makes at most 1 MiB leaves; 2 MiB is the bitswap limit.
	maxBlockSize = 2 << 20
)

func key(kind byte, parts ...[]byte) []byte {
	n := 2
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	k = append(k, kind, '/')
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// Open opens (or creates) the store in dir.
func Open(ctx context.Context, dir string, o StoreOptions) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := badger.DefaultOptions(dir).
		WithInMemory(o.InMemory).
		WithLogger(badgerdb.NewLogger(log)).
		// Blocks above 1 KiB go to the value log: with Badger's default
		// (1 MiB) big blocks land in the LSM tree and fetches run at half
		// speed.
		WithValueThreshold(1 << 10).
		// Sized for a node, not a database server: the LSM tree here holds
		// only keys, pins and small blocks, large blocks live in packs
		// (pack.go). Memtables are arenas that become resident as they
		// fill, so their size is what a busy node's memory settles at.
		WithMemTableSize(512 << 10).
		WithNumMemtables(2).
		// Uncompressed tables are read in place from their mapped files:
		// no block cache full of decompressed copies, and the index of
		// each of the few tables stays in memory. Blocks are mostly
		// compressed or random data already.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithValueLogFileSize(16 << 20).
		WithNumCompactors(2).
		// Every write here is idempotent (same key, same bytes), so
		// conflict detection would only cost time.
		WithDetectConflicts(false)
	if o.InMemory {
		opts = opts.WithDir("").WithValueDir("")
	}
	var p *packs
	if !o.InMemory {
		var err error
		if p, err = openPacks(dir); err != nil {
			return nil, fmt.Errorf("open store in %s: %w", dir, err)
		}
	}
	db, err := badgerdb.Open(opts)
	if err != nil {
		if p != nil {
			_ = p.close()
		}
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
	return &Store{db: db, packs: p, log: log, room: o.Room}, nil
}

// Close closes the store. Only the first call does anything.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.db.Close()
		if s.packs != nil {
			s.closeErr = errors.Join(s.closeErr, s.packs.close())
		}
	})
	return s.closeErr
}

// checkCid accepts only what the importer produces: sha2-256 over raw or
// dag-pb blocks. Refusing other codecs and hashes keeps hostile DAGs from
// using identity hashes (data inside the CID) or codecs we cannot walk.
func checkCid(c cid.Cid) error {
	if !c.Defined() {
		return fmt.Errorf("%w: undefined CID", ErrUnsupported)
	}
	p := c.Prefix()
	if p.MhType != mh.SHA2_256 || p.MhLength != 32 {
		return fmt.Errorf("%w: CID %s uses hash 0x%x, only sha2-256 is accepted", ErrUnsupported, c, p.MhType)
	}
	if p.Codec != cid.Raw && p.Codec != cid.DagProtobuf {
		return fmt.Errorf("%w: CID %s uses codec 0x%x, only raw and dag-pb are accepted", ErrUnsupported, c, p.Codec)
	}
	return nil
}

// verify checks that data hashes to c.
func verify(c cid.Cid, data []byte) error {
	if err := checkCid(c); err != nil {
		return err
	}
	sum, err := mh.Sum(data, mh.SHA2_256, -1)
	if err != nil {
		return fmt.Errorf("hash block %s: %w", c, err)
	}
	if !bytes.Equal(sum, c.Hash()) {
		return fmt.Errorf("%w: block %s", ErrInvalidData, c)
	}
	return nil
}

// blockSize returns the size of the block behind c and whether it is held.
func (s *Store) blockSize(c cid.Cid) (int, bool, error) {
	var n int
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		n, _, found, err = sizeRecord(txn, c)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("size of block %s: %w", c, err)
	}
	return n, found, nil
}

// sizeRecord reads the size record of c: the block's size, where it is if
// it is in a pack, and whether it is held at all.
func sizeRecord(txn *badger.Txn, c cid.Cid) (int, *packLoc, bool, error) {
	it, err := txn.Get(key(kindSize, c.Hash()))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, err
	}
	var n int
	var loc *packLoc
	err = it.Value(func(v []byte) error {
		n, loc, err = decodeSizeRecord(v)
		return err
	})
	if err != nil {
		return 0, nil, false, fmt.Errorf("block %s: %w", c, err)
	}
	return n, loc, true, nil
}

// has reports whether the block behind c is held.
func (s *Store) has(c cid.Cid) (bool, error) {
	_, ok, err := s.blockSize(c)
	return ok, err
}

// blockRef is a held block and where it is stored: in a pack at loc, or,
// if loc is nil, in Badger. gen is the packs' generation read before the
// place was looked up.
type blockRef struct {
	c    cid.Cid
	size int
	loc  *packLoc
	gen  uint64
}

// errPackFreed means a pack was freed while a block was read from it: the
// bytes read may be a hole punched where the block was.
var errPackFreed = errors.New("a pack was freed during the read")

// viewBlock calls fn with the stored bytes of c, unverified; fn must not
// keep the slice. The bulk sender uses it because the receiver hashes every
// block anyway; everything else uses getBlock.
func (s *Store) viewBlock(c cid.Cid, fn func([]byte) error) error {
	gen := s.packs.generation()
	err := s.db.View(func(txn *badger.Txn) error {
		n, loc, held, err := sizeRecord(txn, c)
		if err != nil {
			return err
		}
		if !held {
			return badger.ErrKeyNotFound
		}
		return s.viewRefTxn(txn, blockRef{c: c, size: n, loc: loc, gen: gen}, fn)
	})
	if errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, errPackFreed) {
		// A block GC collected as it was read is gone.
		return fmt.Errorf("block %s: %w", c, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read block %s: %w", c, err)
	}
	return nil
}

// viewRef is viewBlock for a block already looked up: a packed block is
// read without a transaction, and looked up again if GC freed packs since.
func (s *Store) viewRef(ref blockRef, fn func([]byte) error) error {
	if ref.loc != nil {
		err := s.viewPacked(ref.c, ref.size, *ref.loc, ref.gen, fn)
		if !errors.Is(err, errPackFreed) {
			return err
		}
	}
	return s.viewBlock(ref.c, fn)
}

// viewRefTxn is viewRef inside txn, which must be younger than ref.gen:
// a freed pack is errPackFreed.
func (s *Store) viewRefTxn(txn *badger.Txn, ref blockRef, fn func([]byte) error) error {
	if ref.loc != nil {
		return s.viewPacked(ref.c, ref.size, *ref.loc, ref.gen, fn)
	}
	it, err := txn.Get(key(kindBlock, ref.c.Hash()))
	if err != nil {
		return err
	}
	return it.Value(fn)
}

// viewPacked reads a packed block into a pooled buffer and calls fn with
// it, unless GC freed packs since generation gen (errPackFreed).
func (s *Store) viewPacked(c cid.Cid, n int, loc packLoc, gen uint64, fn func([]byte) error) error {
	if s.packs == nil || n > maxBlockSize {
		return fmt.Errorf("%w: block %s names pack %d, which this store cannot have", ErrInvalidData, c, loc.pack)
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, maxBlockSize)
		bp = &b
	}
	defer s.bufs.Put(bp)
	buf := (*bp)[:n]
	err := s.packs.read(loc, buf)
	if s.packs.generation() != gen {
		return fmt.Errorf("block %s: %w", c, errPackFreed)
	}
	if err != nil {
		return fmt.Errorf("block %s: %w", c, err)
	}
	return fn(buf)
}

// getBlock reads the block behind c and checks its hash.
func (s *Store) getBlock(c cid.Cid) (blocks.Block, error) {
	return readVerified(c, func(fn func([]byte) error) error { return s.viewBlock(c, fn) })
}

// readVerified copies the bytes view hands over and checks that they hash
// to c.
func readVerified(c cid.Cid, view func(fn func([]byte) error) error) (blocks.Block, error) {
	var data []byte
	if err := view(func(v []byte) error {
		data = bytes.Clone(v)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := verify(c, data); err != nil {
		return nil, err
	}
	return blocks.NewBlockWithCid(data, c)
}

// getRef is getBlock for a block already looked up, inside txn. A block
// whose pack GC freed since ref was looked up is ErrNotFound.
func (s *Store) getRef(txn *badger.Txn, ref blockRef) (blocks.Block, error) {
	return readVerified(ref.c, func(fn func([]byte) error) error {
		err := s.viewRefTxn(txn, ref, fn)
		if errors.Is(err, errPackFreed) {
			return fmt.Errorf("block %s: %w", ref.c, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read block %s: %w", ref.c, err)
		}
		return nil
	})
}

// putBlocks writes blocks the caller has already verified, skipping those
// already held, if the disk has room for them (makeRoom). It returns the
// number of blocks and bytes newly written.
func (s *Store) putBlocks(bs []blocks.Block) (int, int64, error) {
	if err := s.makeRoom(bs); err != nil {
		return 0, 0, err
	}
	return s.putBlocksChecked(bs)
}

// putBlocksChecked is putBlocks once the room for bs is known.
func (s *Store) putBlocksChecked(bs []blocks.Block) (int, int64, error) {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var n int
	var written int64
	var size [4]byte
	for _, b := range bs {
		held, err := s.has(b.Cid())
		if err != nil {
			return n, written, err
		}
		if held {
			continue
		}
		data := b.RawData()
		if len(data) > maxBlockSize {
			return n, written, fmt.Errorf("%w: block %s is %d bytes, over the %d limit", ErrUnsupported, b.Cid(), len(data), maxBlockSize)
		}
		binary.BigEndian.PutUint32(size[:], uint32(len(data)))
		// The size record goes second so that it never exists without
		// the bytes, even when the batch is split across transactions.
		entries := []*badger.Entry{
			badger.NewEntry(key(kindBlock, b.Cid().Hash()), data),
			badger.NewEntry(key(kindSize, b.Cid().Hash()), bytes.Clone(size[:])),
		}
		for _, e := range entries {
			err := txn.SetEntry(e)
			if errors.Is(err, badger.ErrTxnTooBig) {
				if err := txn.Commit(); err != nil {
					return n, written, fmt.Errorf("write blocks: %w", err)
				}
				txn = s.db.NewTransaction(true)
				err = txn.SetEntry(e)
			}
			if err != nil {
				return n, written, fmt.Errorf("write block %s: %w", b.Cid(), err)
			}
		}
		n++
		written += int64(len(data))
	}
	if err := txn.Commit(); err != nil {
		return n, written, fmt.Errorf("write blocks: %w", err)
	}
	return n, written, nil
}

// packIndex is what a blockWriter has put in packs and not yet recorded
// in Badger: the records are written only once the packs are synced.
type packIndex struct {
	pending map[string][]byte // multihash → size record
}

// putBlocksPacked writes blocks the caller has already verified, skipping
// those already held: large ones to the packs (through the page cache if
// cache is set), their size records to idx for indexPacked, the rest to
// Badger with putBlocks. It returns the number
// of blocks and bytes newly written.
func (s *Store) putBlocksPacked(bs []blocks.Block, idx *packIndex, cache bool) (int, int64, error) {
	if s.packs == nil {
		return s.putBlocks(bs)
	}
	if err := s.makeRoom(bs); err != nil {
		return 0, 0, err
	}
	var small []blocks.Block
	var large [][]byte
	var hashes []string
	for _, b := range bs {
		data := b.RawData()
		if len(data) < packMinBlock {
			small = append(small, b)
			continue
		}
		h := string(b.Cid().Hash())
		if _, ok := idx.pending[h]; ok || slices.Contains(hashes, h) {
			continue
		}
		held, err := s.has(b.Cid())
		if err != nil {
			return 0, 0, err
		}
		if held {
			continue
		}
		if len(data) > maxBlockSize {
			return 0, 0, fmt.Errorf("%w: block %s is %d bytes, over the %d limit", ErrUnsupported, b.Cid(), len(data), maxBlockSize)
		}
		large = append(large, data)
		hashes = append(hashes, h)
	}
	var written int64
	if len(large) > 0 {
		locs, err := s.packs.append(large, cache)
		if err != nil {
			return 0, 0, err
		}
		if idx.pending == nil {
			idx.pending = map[string][]byte{}
		}
		for i, loc := range locs {
			idx.pending[hashes[i]] = encodeSizeRecord(len(large[i]), &loc)
			written += int64(len(large[i]))
		}
	}
	n, w, err := s.putBlocksChecked(small)
	return n + len(large), written + w, err
}

// indexPacked syncs the packs, then writes the size records in idx, which
// makes those blocks held. The records are not synced here: commit syncs
// Badger before it pins.
func (s *Store) indexPacked(idx *packIndex) error {
	if len(idx.pending) == 0 {
		return nil
	}
	if err := s.packs.sync(); err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for h, rec := range idx.pending {
		if err := wb.Set(key(kindSize, []byte(h)), rec); err != nil {
			return fmt.Errorf("index packed blocks: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index packed blocks: %w", err)
	}
	idx.pending = nil
	return nil
}

// deleteKeys deletes keys in one batch; callers order size records before
// block bytes.
func (s *Store) deleteKeys(keys [][]byte) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// scanPrefix calls fn with every key under prefix (a copy) without reading
// values.
func (s *Store) scanPrefix(ctx context.Context, prefix []byte, fn func(k []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		o.Prefix = prefix
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
}

// scanSizes calls fn with the multihash (a copy) and the decoded size
// record of every block held.
func (s *Store) scanSizes(ctx context.Context, fn func(h []byte, size int, loc *packLoc) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte{kindSize, '/'}
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().KeyCopy(nil)
			err := it.Item().Value(func(v []byte) error {
				n, loc, err := decodeSizeRecord(v)
				if err != nil {
					return fmt.Errorf("block %x: %w", k[2:], err)
				}
				return fn(k[2:], n, loc)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// sync makes every write so far durable. Pins are written only after a
// sync, so a pin never names blocks a crash could lose.
func (s *Store) sync() error {
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	return nil
}
