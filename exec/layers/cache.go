package layers

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCacheBytes is the cache's cap when CacheOptions.MaxBytes is 0.
const DefaultCacheBytes = 64 << 30

// Errors of the cache, for callers that branch.
var (
	// ErrBadDigest: a digest that is not "sha256:" and 64 lowercase hex
	// digits. It would become a directory name, so nothing else passes.
	ErrBadDigest = errors.New("malformed layer digest")
	// ErrDigestMismatch: the blob that Blob.Open returned hashes to another
	// digest. Nothing of it is kept.
	ErrDigestMismatch = errors.New("layer blob does not match its digest")
	// ErrInUse: Remove of a layer that is acquired or being unpacked.
	ErrInUse = errors.New("layer is in use")
	// ErrClosed: the cache was closed.
	ErrClosed = errors.New("layer cache is closed")
)

// metaFormat changes when the on-disk layout or the tree digest changes;
// entries of another format are dropped at Open.
const metaFormat = 1

// Names inside the cache directory.
const (
	entriesDir = "sha256" // one directory per layer, named by the digest's hex
	tmpDir     = "tmp"    // unpacks in progress and removals; emptied at Open
	rootfsName = "rootfs" // inside an entry: the layer, an overlay lowerdir
	metaName   = "meta.json"
)

// CacheOptions configures [OpenCache]. The zero value is usable.
type CacheOptions struct {
	// MaxBytes is the disk use the cache keeps under by evicting the least
	// recently used layers that are not in use (--image-cache-size); 0
	// means DefaultCacheBytes. Layers in use are never evicted, so the
	// cache can exceed it while they are held.
	MaxBytes int64
	// Unpack sets the id shift and per-layer caps of every unpack. Its
	// MediaType is ignored: the blob's bytes decide.
	Unpack UnpackOptions
	// Log receives evictions, repairs and an over-cap warning; nil
	// discards them.
	Log *slog.Logger
}

// CacheStats is a snapshot of the cache.
type CacheStats struct {
	// Entries: layers on disk or being unpacked for an Acquire. Bytes:
	// the disk use of the complete ones.
	Entries int
	Bytes   int64
	// InUse and InUseBytes: the layers acquired and not yet released.
	InUse      int
	InUseBytes int64
	MaxBytes   int64
	// OverCap: Bytes is above MaxBytes and every layer that could be
	// evicted has been; the rest is in use.
	OverCap bool
	// Counters since Open. Repairs are damaged layers unpacked again.
	Hits, Unpacks, Evictions, Repairs uint64
}

// Cache keeps unpacked layers under one directory, one per layer digest,
// shared by every image that names the layer, bounded by a size with
// least-recently-used eviction. Its methods are safe for concurrent use.
type Cache struct {
	// Immutable after OpenCache.
	dir    string
	opts   CacheOptions
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: stops unpacks in flight
	cancel context.CancelFunc
	// inflight counts unpacks, checks and removals, so Close can wait.
	inflight sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu.
	entries map[string]*entry // by the digest's hex
	bytes   int64             // disk use of the ready entries
	seq     uint64            // logical clock of uses, for LRU order
	closed  bool
	overCap bool

	// Counters, guarded by mu.
	hits, unpacks, evictions, repairs uint64
}

type entryState int

const (
	// stateBusy: being unpacked, checked or removed; wait on busy.
	stateBusy entryState = iota
	stateReady
)

// entry is one layer. All fields are guarded by Cache.mu.
type entry struct {
	state entryState
	busy  chan struct{} // closed when a busy state ends
	err   error         // why the last unpack failed, for its waiters
	refs  int
	size  int64
	used  uint64 // Cache.seq at the last Acquire or release
	// waiters counts Acquires blocked on busy.
	waiters int
}

type entryMeta struct {
	Format    int         `json:"format"`
	Digest    string      `json:"digest"`
	Tree      string      `json:"tree"`
	DiskBytes int64       `json:"disk_bytes"`
	UIDBase   int         `json:"uid_base"`
	GIDBase   int         `json:"gid_base"`
	Unpacked  time.Time   `json:"unpacked"`
	Stats     UnpackStats `json:"stats"`
}

// OpenCache opens (creating it if needed) the cache in dir, keeps the
// complete layers found there, removes unpacks a crash interrupted and
// layers unpacked with another id shift, and evicts down to the cap. The
// last use of each layer is the mtime of its meta.json, so LRU order
// survives a restart.
func OpenCache(ctx context.Context, dir string, opts CacheOptions) (*Cache, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultCacheBytes
	}
	opts.Unpack.MediaType = ""
	opts.Unpack = opts.Unpack.withDefaults()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{dir, filepath.Join(dir, entriesDir), filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create layer cache: %w", err)
		}
	}
	if err := emptyDir(filepath.Join(dir, tmpDir)); err != nil {
		return nil, fmt.Errorf("sweep layer cache: %w", err)
	}
	c := &Cache{dir: dir, opts: opts, log: opts.Log, entries: map[string]*entry{}}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))

	names, err := os.ReadDir(filepath.Join(dir, entriesDir))
	if err != nil {
		return nil, fmt.Errorf("list layer cache: %w", err)
	}
	type found struct {
		hex  string
		size int64
		used time.Time
	}
	var kept []found
	for _, de := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h := de.Name()
		meta, mtime, err := c.readMeta(h)
		if err == nil && validHex(h) && meta.Digest == "sha256:"+h {
			kept = append(kept, found{h, meta.DiskBytes, mtime})
			continue
		}
		c.log.Warn("layer cache: dropping an incomplete or stale entry", "entry", h, "why", err)
		if err := c.removeEntryDir(h); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(kept, func(a, b found) int {
		return cmp.Or(a.used.Compare(b.used), strings.Compare(a.hex, b.hex))
	})
	for _, f := range kept {
		c.seq++
		c.entries[f.hex] = &entry{state: stateReady, size: f.size, used: c.seq}
		c.bytes += f.size
	}
	c.evict()
	return c, nil
}

// readMeta reads an entry's completion record and checks it was written
// for this cache's format and id shift.
func (c *Cache) readMeta(hexd string) (entryMeta, time.Time, error) {
	p := filepath.Join(c.dir, entriesDir, hexd, metaName)
	var m entryMeta
	f, err := os.Open(p)
	if err != nil {
		return m, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return m, time.Time{}, err
	}
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&m); err != nil {
		return m, time.Time{}, fmt.Errorf("decode %s: %w", metaName, err)
	}
	switch {
	case m.Format != metaFormat:
		return m, time.Time{}, fmt.Errorf("format %d, want %d", m.Format, metaFormat)
	case m.UIDBase != c.opts.Unpack.UIDBase || m.GIDBase != c.opts.Unpack.GIDBase:
		return m, time.Time{}, fmt.Errorf("unpacked for ids from %d:%d, want %d:%d",
			m.UIDBase, m.GIDBase, c.opts.Unpack.UIDBase, c.opts.Unpack.GIDBase)
	}
	return m, st.ModTime(), nil
}

// Blob is a layer blob to acquire.
type Blob struct {
	// Digest is "sha256:…", the digest of the blob as stored (compressed
	// or not) as the manifest names it: the cache's key.
	Digest string
	// MediaType is the manifest's media type of the layer; the bytes must
	// agree with it (UnpackOptions.MediaType). Empty: the bytes decide.
	MediaType string
	// Open returns the blob's bytes, for an unpack.
	Open func(context.Context) (io.ReadCloser, error)
}

// Acquire returns the directory of the unpacked layer with this digest
// ("sha256:…", the digest of the compressed blob as the manifest names
// it), to be used read-only as an overlay lowerdir, and a release to call
// when the overlay is gone. On a miss it unpacks the blob that b.Open
// returns, checking it against the digest; concurrent Acquires of one
// digest share one unpack. A layer that was not in use is first checked
// against the metadata digest recorded when it was unpacked, and unpacked
// again if it was damaged. A layer stays on disk, never evicted, until
// every Acquire of it is released; release may evict other layers before
// it returns, and calling it twice is harmless.
func (c *Cache) Acquire(ctx context.Context, b Blob) (dir string, release func(), err error) {
	hexd, err := parseDigest(b.Digest)
	if err != nil {
		return "", nil, err
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return "", nil, ErrClosed
		}
		e := c.entries[hexd]
		switch {
		case e == nil:
			e = &entry{state: stateBusy, busy: make(chan struct{}), refs: 1}
			c.entries[hexd] = e
			c.inflight.Add(1)
			c.mu.Unlock()
			if err := c.load(ctx, hexd, e, b, false); err != nil {
				return "", nil, err
			}
			return c.rootfs(hexd), c.releaser(hexd, e), nil

		case e.state == stateBusy:
			busy := e.busy
			e.waiters++
			c.mu.Unlock()
			var werr error
			select {
			case <-busy:
			case <-ctx.Done():
				werr = ctx.Err()
			}
			c.mu.Lock()
			e.waiters--
			lerr := e.err
			c.mu.Unlock()
			if werr != nil {
				return "", nil, werr
			}
			// An unpack that failed on its own context is retried by us;
			// one that failed on the blob would fail again.
			if lerr != nil && !errors.Is(lerr, context.Canceled) && !errors.Is(lerr, context.DeadlineExceeded) {
				return "", nil, lerr
			}

		case e.refs > 0:
			// In use, so checked when its first user acquired it.
			e.refs++
			c.seq++
			e.used = c.seq
			c.hits++
			c.mu.Unlock()
			c.touch(hexd)
			return c.rootfs(hexd), c.releaser(hexd, e), nil

		default:
			e.state = stateBusy
			e.busy = make(chan struct{})
			e.err = nil
			e.refs = 1
			c.inflight.Add(1)
			c.mu.Unlock()
			if err := c.load(ctx, hexd, e, b, true); err != nil {
				return "", nil, err
			}
			return c.rootfs(hexd), c.releaser(hexd, e), nil
		}
	}
}

func (c *Cache) rootfs(hexd string) string {
	return filepath.Join(c.dir, entriesDir, hexd, rootfsName)
}

// load makes e ready, holding one reference for the caller, or removes
// it. With check, e is on disk already and is unpacked again only if its
// tree no longer matches its record.
func (c *Cache) load(ctx context.Context, hexd string, e *entry, b Blob, check bool) error {
	defer c.inflight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	if check {
		err := c.check(ctx, hexd)
		if err == nil {
			c.mu.Lock()
			c.hits++
			c.seq++
			e.used = c.seq
			e.state = stateReady
			close(e.busy)
			c.mu.Unlock()
			c.touch(hexd)
			return nil
		}
		if ctx.Err() != nil {
			// Not damaged, only interrupted: leave it as it was.
			c.mu.Lock()
			e.refs = 0
			e.state = stateReady
			e.err = ctx.Err()
			close(e.busy)
			c.mu.Unlock()
			return ctx.Err()
		}
		c.log.Warn("layer cache: damaged layer, unpacking it again", "digest", "sha256:"+hexd, "why", err)
		c.mu.Lock()
		c.bytes -= e.size
		e.size = 0
		c.repairs++
		c.mu.Unlock()
		if err := c.removeEntryDir(hexd); err != nil {
			return c.fail(hexd, e, err)
		}
	}

	size, err := c.unpack(ctx, hexd, b)
	if err != nil {
		return c.fail(hexd, e, err)
	}
	c.mu.Lock()
	c.unpacks++
	c.seq++
	e.used = c.seq
	e.size = size
	c.bytes += size
	e.state = stateReady
	close(e.busy)
	c.mu.Unlock()
	c.evict()
	return nil
}

func (c *Cache) fail(hexd string, e *entry, err error) error {
	c.mu.Lock()
	delete(c.entries, hexd)
	e.err = err
	e.refs = 0
	close(e.busy)
	c.mu.Unlock()
	return err
}

// check compares a layer on disk with the record written at its unpack.
func (c *Cache) check(ctx context.Context, hexd string) error {
	meta, _, err := c.readMeta(hexd)
	if err != nil {
		return err
	}
	sum, err := summarize(ctx, c.rootfs(hexd))
	if err != nil {
		return err
	}
	if sum.Digest != meta.Tree {
		return fmt.Errorf("tree digest %s, recorded %s", sum.Digest, meta.Tree)
	}
	return nil
}

// unpack writes the layer into a temporary directory and moves it into
// place once it is complete and on disk, so that a crash leaves either a
// complete entry or debris in tmp/ that Open removes.
func (c *Cache) unpack(ctx context.Context, hexd string, b Blob) (int64, error) {
	digest := "sha256:" + hexd
	tmp, err := os.MkdirTemp(filepath.Join(c.dir, tmpDir), hexd+".")
	if err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	rootfs := filepath.Join(tmp, rootfsName)
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}

	rc, err := b.Open(ctx)
	if err != nil {
		return 0, fmt.Errorf("layer %s: open blob: %w", digest, err)
	}
	defer rc.Close()
	h := sha256.New()
	blob := io.TeeReader(rc, h)
	opts := c.opts.Unpack
	opts.MediaType = b.MediaType
	stats, err := Unpack(ctx, blob, rootfs, opts)
	if err != nil {
		// The caller names the layer: what is wrong with it is enough.
		return 0, err
	}
	if _, err := io.Copy(io.Discard, blob); err != nil {
		return 0, fmt.Errorf("layer %s: read blob: %w", digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hexd {
		return 0, fmt.Errorf("layer %s: %w: got sha256:%s", digest, ErrDigestMismatch, got)
	}
	sum, err := summarize(ctx, rootfs)
	if err != nil {
		return 0, fmt.Errorf("layer %s: summarize: %w", digest, err)
	}
	if err := syncFS(rootfs); err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}
	meta := entryMeta{
		Format: metaFormat, Digest: digest, Tree: sum.Digest, DiskBytes: sum.DiskBytes,
		UIDBase: c.opts.Unpack.UIDBase, GIDBase: c.opts.Unpack.GIDBase,
		Unpacked: time.Now().UTC(), Stats: stats,
	}
	if err := writeSynced(filepath.Join(tmp, metaName), meta); err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}
	final := filepath.Join(c.dir, entriesDir, hexd)
	if err := os.Rename(tmp, final); err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}
	if err := syncDir(filepath.Join(c.dir, entriesDir)); err != nil {
		return 0, fmt.Errorf("layer %s: %w", digest, err)
	}
	c.log.Info("layer cache: unpacked", "digest", digest, "compression", stats.Compression.String(),
		"entries", stats.Entries, "bytes", stats.Bytes, "disk_bytes", sum.DiskBytes, "skipped", stats.Skipped)
	return sum.DiskBytes, nil
}

// releaser returns the release func of one Acquire.
func (c *Cache) releaser(hexd string, e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			// Touch while still holding the reference, so the entry
			// cannot be evicted under the write.
			c.touch(hexd)
			c.mu.Lock()
			e.refs--
			c.seq++
			e.used = c.seq
			closed := c.closed
			c.mu.Unlock()
			if !closed {
				c.evict()
			}
		})
	}
}

// touch records a use in the entry's meta.json mtime, which OpenCache
// reads back as LRU order.
func (c *Cache) touch(hexd string) {
	now := time.Now()
	p := filepath.Join(c.dir, entriesDir, hexd, metaName)
	if err := os.Chtimes(p, now, now); err != nil {
		c.log.Warn("layer cache: cannot record a use", "digest", "sha256:"+hexd, "err", err)
	}
}

// evict removes least recently used layers that are not in use until the
// cache is under its cap, or says that what is left is in use.
func (c *Cache) evict() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	type victim struct {
		hex string
		e   *entry
	}
	var idle []victim
	for h, e := range c.entries {
		if e.state == stateReady && e.refs == 0 {
			idle = append(idle, victim{h, e})
		}
	}
	slices.SortFunc(idle, func(a, b victim) int { return cmp.Compare(a.e.used, b.e.used) })
	var victims []victim
	for _, v := range idle {
		if c.bytes <= c.opts.MaxBytes {
			break
		}
		v.e.state = stateBusy
		v.e.busy = make(chan struct{})
		c.bytes -= v.e.size
		c.evictions++
		victims = append(victims, v)
	}
	over := c.bytes > c.opts.MaxBytes
	if over && !c.overCap {
		var inUse int64
		for _, e := range c.entries {
			if e.refs > 0 {
				inUse += e.size
			}
		}
		c.log.Warn("layer cache: over its cap, the rest is in use and cannot be evicted",
			"bytes", c.bytes, "max_bytes", c.opts.MaxBytes, "in_use_bytes", inUse)
	}
	c.overCap = over
	c.inflight.Add(len(victims))
	c.mu.Unlock()

	for _, v := range victims {
		err := c.removeEntryDir(v.hex)
		if err != nil {
			c.log.Error("layer cache: evict", "digest", "sha256:"+v.hex, "err", err)
		} else {
			c.log.Info("layer cache: evicted", "digest", "sha256:"+v.hex, "disk_bytes", v.e.size)
		}
		c.mu.Lock()
		delete(c.entries, v.hex)
		close(v.e.busy)
		c.mu.Unlock()
		c.inflight.Done()
	}
}

// Remove deletes a layer that is not in use, such as one the caller found
// damaged; the next Acquire unpacks it again. Removing an absent layer is
// not an error.
func (c *Cache) Remove(digest string) error {
	hexd, err := parseDigest(digest)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	e := c.entries[hexd]
	if e == nil {
		c.mu.Unlock()
		return nil
	}
	if e.state != stateReady || e.refs > 0 {
		c.mu.Unlock()
		return fmt.Errorf("remove %s: %w", digest, ErrInUse)
	}
	e.state = stateBusy
	e.busy = make(chan struct{})
	c.bytes -= e.size
	c.inflight.Add(1)
	c.mu.Unlock()
	defer c.inflight.Done()

	err = c.removeEntryDir(hexd)
	c.mu.Lock()
	delete(c.entries, hexd)
	close(e.busy)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("remove %s: %w", digest, err)
	}
	return nil
}

// Stats returns a snapshot of the cache.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CacheStats{
		Bytes: c.bytes, MaxBytes: c.opts.MaxBytes, OverCap: c.overCap,
		Hits: c.hits, Unpacks: c.unpacks, Evictions: c.evictions, Repairs: c.repairs,
	}
	for _, e := range c.entries {
		if e.state == stateReady || e.refs > 0 {
			s.Entries++
		}
		if e.refs > 0 {
			s.InUse++
			s.InUseBytes += e.size
		}
	}
	return s
}

// Close stops unpacks in flight and waits for them and for removals. Layers
// still acquired stay on disk, and their releases remain safe to call.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.inflight.Wait()
	return nil
}

// removeEntryDir moves an entry out of entries/ (one rename, so a crash
// never leaves half an entry there) and deletes it.
func (c *Cache) removeEntryDir(hexd string) error {
	src := filepath.Join(c.dir, entriesDir, hexd)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	trash := filepath.Join(c.dir, tmpDir, "removed-"+hexd+"-"+hex.EncodeToString(suffix[:]))
	if err := os.Rename(src, trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove layer: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("remove layer: %w", err)
	}
	return nil
}

func parseDigest(d string) (string, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || !validHex(h) {
		return "", fmt.Errorf("%w: %q", ErrBadDigest, d)
	}
	return h, nil
}

func validHex(h string) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for _, r := range h {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

func emptyDir(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// syncFS flushes the filesystem holding dir: one syncfs instead of an
// fsync per file of the layer.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeSynced(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
