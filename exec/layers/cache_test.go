package layers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blob is a layer blob served to the cache by a counting open func.
type blob struct {
	digest string
	data   []byte
	opens  atomic.Int32
}

func newBlob(tb testing.TB, ents ...tent) *blob {
	data := gzipped(tb, buildTar(tb, ents...))
	return &blob{digest: digestOf(data), data: data}
}

func (b *blob) open(context.Context) (io.ReadCloser, error) {
	b.opens.Add(1)
	return io.NopCloser(bytes.NewReader(b.data)), nil
}

// layerBlob is a layer with a file of n bytes, distinct per name.
func layerBlob(tb testing.TB, name string, n int) *blob {
	return newBlob(tb, dir(name+"/"), file(name+"/data", strings.Repeat(name[:1], n)), symlink(name+"/link", "data"))
}

func openCache(tb testing.TB, dir string, opts CacheOptions) *Cache {
	tb.Helper()
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c, err := OpenCache(context.Background(), dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func acquire(tb testing.TB, c *Cache, b *blob) (string, func()) {
	tb.Helper()
	dir, release, err := c.Acquire(context.Background(), Blob{Digest: b.digest, Open: b.open})
	if err != nil {
		tb.Fatalf("acquire %s: %v", b.digest, err)
	}
	return dir, release
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestCacheSharesABaseLayer(t *testing.T) {
	requireRoot(t)
	c := openCache(t, t.TempDir(), CacheOptions{})
	base, a, b := layerBlob(t, "base", 1000), layerBlob(t, "app1", 10), layerBlob(t, "app2", 10)
	var dirs []string
	for _, image := range [][]*blob{{base, a}, {base, b}} {
		for _, l := range image {
			d, release := acquire(t, c, l)
			defer release()
			dirs = append(dirs, d)
		}
	}
	if dirs[0] != dirs[2] {
		t.Errorf("base unpacked at %s and %s", dirs[0], dirs[2])
	}
	if n := base.opens.Load(); n != 1 {
		t.Errorf("base opened %d times, want 1", n)
	}
	st := c.Stats()
	if st.Entries != 3 || st.Unpacks != 3 || st.Hits != 1 || st.InUse != 3 {
		t.Errorf("stats %+v, want 3 entries, 3 unpacks, 1 hit, 3 in use", st)
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "base/link")); err != nil || len(b) != 1000 {
		t.Errorf("base/link: %d bytes, %v", len(b), err)
	}
}

func TestCacheEvictsLeastRecentlyUsedNeverInUse(t *testing.T) {
	requireRoot(t)
	var logs bytes.Buffer
	a, b, cl := layerBlob(t, "aaa", 64<<10), layerBlob(t, "bbb", 64<<10), layerBlob(t, "ccc", 64<<10)

	// Measure one layer's disk use, then cap the cache at three and a half.
	probe := openCache(t, t.TempDir(), CacheOptions{})
	_, rel := acquire(t, probe, a)
	rel()
	size := probe.Stats().Bytes
	if size <= 0 {
		t.Fatalf("layer size %d", size)
	}

	c := openCache(t, t.TempDir(), CacheOptions{MaxBytes: 3*size + size/2,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	dirA, relA := acquire(t, c, a) // held throughout
	dirB, relB := acquire(t, c, b)
	relB()
	dirC, relC := acquire(t, c, cl)
	relC()
	if !exists(dirA) || !exists(dirB) || !exists(dirC) {
		t.Fatalf("under the cap, something was evicted: %v %v %v", exists(dirA), exists(dirB), exists(dirC))
	}
	// A fourth layer puts the cache over its cap: B, the least recently
	// used of those not in use, goes; A is older but in use.
	d := layerBlob(t, "ddd", 64<<10)
	dirD, relD := acquire(t, c, d)
	if exists(dirB) || !exists(dirA) || !exists(dirC) || !exists(dirD) {
		t.Errorf("after D: A %v B %v C %v D %v; want B evicted only", exists(dirA), exists(dirB), exists(dirC), exists(dirD))
	}
	relD()

	// Shrink the room: with a cap below A alone, A stays while held.
	tiny := openCache(t, t.TempDir(), CacheOptions{MaxBytes: 1,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	dirTA, relTA := acquire(t, tiny, a)
	_, relTB := acquire(t, tiny, b)
	relTB()
	if !exists(dirTA) {
		t.Fatal("an acquired layer was evicted")
	}
	st := tiny.Stats()
	if !st.OverCap || st.Entries != 1 || st.InUse != 1 || st.Evictions != 1 {
		t.Errorf("stats %+v, want over cap with the one layer in use", st)
	}
	if !strings.Contains(logs.String(), "over its cap") {
		t.Errorf("no over-cap warning in the log:\n%s", logs.String())
	}
	relTA()
	relTA() // twice is harmless
	if exists(dirTA) || tiny.Stats().Bytes != 0 || tiny.Stats().OverCap {
		t.Errorf("released layer over the cap was not evicted: %+v", tiny.Stats())
	}
	relA()
}

func TestCacheRepairsDamagedLayer(t *testing.T) {
	requireRoot(t)
	c := openCache(t, t.TempDir(), CacheOptions{})
	l := layerBlob(t, "lay", 4096)
	for i, damage := range []func(dir string) error{
		func(dir string) error { return os.Remove(filepath.Join(dir, "lay/data")) },
		func(dir string) error {
			f, err := os.OpenFile(filepath.Join(dir, "lay/data"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte("X"), 10) // same size, new mtime
			return err
		},
		func(dir string) error { return os.Chmod(filepath.Join(dir, "lay"), 0o777) },
		func(dir string) error { return os.WriteFile(filepath.Join(dir, "lay/extra"), nil, 0o644) },
	} {
		dir, release := acquire(t, c, l)
		release()
		if err := damage(dir); err != nil {
			t.Fatal(err)
		}
		dir, release = acquire(t, c, l)
		b, err := os.ReadFile(filepath.Join(dir, "lay/data"))
		if err != nil || string(b) != strings.Repeat("l", 4096) || exists(filepath.Join(dir, "lay/extra")) {
			t.Errorf("damage %d: not repaired: %v", i, err)
		}
		release()
		if got, want := c.Stats().Repairs, uint64(i+1); got != want {
			t.Errorf("damage %d: %d repairs, want %d", i, got, want)
		}
	}
	// Undamaged, it is not unpacked again.
	opens := l.opens.Load()
	_, release := acquire(t, c, l)
	release()
	if l.opens.Load() != opens {
		t.Error("an intact layer was unpacked again")
	}
}

func TestCacheRestartReusesEntries(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	a, b := layerBlob(t, "aaa", 8<<10), layerBlob(t, "bbb", 8<<10)
	c := openCache(t, root, CacheOptions{})
	dirA, relA := acquire(t, c, a)
	relA()
	dirB, relB := acquire(t, c, b)
	relB()
	sizeB := c.Stats().Bytes / 2
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Debris of a crash: a half-done unpack and an entry without its
	// completion record.
	mkdirs(t, filepath.Join(root, tmpDir, "deadbeef.123/rootfs/x"),
		filepath.Join(root, entriesDir, strings.Repeat("ab", 32), rootfsName))

	// Reopened with room for one layer, it keeps B, used last.
	c2 := openCache(t, root, CacheOptions{MaxBytes: sizeB + sizeB/2})
	if exists(dirA) || !exists(dirB) {
		t.Errorf("after restart: A %v B %v; want only B, the most recently used", exists(dirA), exists(dirB))
	}
	if exists(filepath.Join(root, tmpDir, "deadbeef.123")) || exists(filepath.Join(root, entriesDir, strings.Repeat("ab", 32))) {
		t.Error("partial entries were not swept")
	}
	fail := func(context.Context) (io.ReadCloser, error) {
		return nil, errors.New("a complete layer was unpacked again after a restart")
	}
	dir, release, err := c2.Acquire(context.Background(), Blob{Digest: b.digest, Open: fail})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if dir != dirB {
		t.Errorf("dir %s, want %s", dir, dirB)
	}
	if st := c2.Stats(); st.Entries != 1 || st.Hits != 1 || st.Unpacks != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestCacheConcurrentAcquireUnpacksOnce(t *testing.T) {
	requireRoot(t)
	c := openCache(t, t.TempDir(), CacheOptions{})
	l := layerBlob(t, "one", 1<<20)
	const n = 8
	h, _ := parseDigest(l.digest)
	waiters := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e := c.entries[h]; e != nil {
			return e.waiters
		}
		return 0
	}
	// The unpack does not start until every other Acquire is waiting on it.
	open := func(ctx context.Context) (io.ReadCloser, error) {
		deadline := time.Now().Add(10 * time.Second)
		for waiters() < n-1 {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("only %d Acquires waiting", waiters())
			}
			time.Sleep(time.Millisecond)
		}
		return l.open(ctx)
	}
	var wg sync.WaitGroup
	dirs := make([]string, n)
	errs := make([]error, n)
	releases := make([]func(), n)
	for i := range n {
		wg.Go(func() {
			dirs[i], releases[i], errs[i] = c.Acquire(context.Background(), Blob{Digest: l.digest, Open: open})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Errorf("dirs differ: %s %s", dirs[i], dirs[0])
		}
	}
	if got := l.opens.Load(); got != 1 {
		t.Errorf("unpacked %d times, want 1", got)
	}
	if st := c.Stats(); st.InUse != 1 || st.Unpacks != 1 {
		t.Errorf("stats %+v", st)
	}
	for _, r := range releases {
		r()
	}
	if st := c.Stats(); st.InUse != 0 {
		t.Errorf("in use after releases: %+v", st)
	}
}

func TestCacheRefusesWrongBlob(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	c := openCache(t, root, CacheOptions{})
	good, other := layerBlob(t, "good", 10), layerBlob(t, "evil", 10)
	_, _, err := c.Acquire(context.Background(), Blob{Digest: good.digest, Open: other.open})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err %v, want ErrDigestMismatch", err)
	}
	if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("stats %+v after a refused blob", st)
	}
	if des, _ := os.ReadDir(filepath.Join(root, tmpDir)); len(des) != 0 {
		t.Errorf("tmp holds %d leftovers", len(des))
	}
	// The right blob is accepted afterwards.
	_, release := acquire(t, c, good)
	release()
}

func TestCacheHostileLayerLeavesNothing(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	c := openCache(t, root, CacheOptions{})
	evil := newBlob(t, symlink("a", "/etc"), file("a/passwd", "x"))
	_, _, err := c.Acquire(context.Background(), Blob{Digest: evil.digest, Open: evil.open})
	if !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), "a/passwd") {
		t.Fatalf("err %v, want ErrUnsafePath naming a/passwd", err)
	}
	for _, d := range []string{tmpDir, entriesDir} {
		if des, _ := os.ReadDir(filepath.Join(root, d)); len(des) != 0 {
			t.Errorf("%s holds %d leftovers", d, len(des))
		}
	}
}

func TestCacheOpenErrorIsRetried(t *testing.T) {
	requireRoot(t)
	c := openCache(t, t.TempDir(), CacheOptions{})
	l := layerBlob(t, "lay", 10)
	broken := errors.New("peer went away")
	_, _, err := c.Acquire(context.Background(), Blob{Digest: l.digest, Open: func(context.Context) (io.ReadCloser, error) { return nil, broken }})
	if !errors.Is(err, broken) {
		t.Fatalf("err %v", err)
	}
	_, release := acquire(t, c, l)
	release()
}

func TestCacheRemove(t *testing.T) {
	requireRoot(t)
	c := openCache(t, t.TempDir(), CacheOptions{})
	l := layerBlob(t, "lay", 10)
	dir, release := acquire(t, c, l)
	if err := c.Remove(l.digest); !errors.Is(err, ErrInUse) {
		t.Errorf("remove in use: %v, want ErrInUse", err)
	}
	release()
	if err := c.Remove(l.digest); err != nil {
		t.Fatal(err)
	}
	if exists(dir) || c.Stats().Entries != 0 {
		t.Error("removed layer still there")
	}
	if err := c.Remove(l.digest); err != nil {
		t.Errorf("remove of an absent layer: %v", err)
	}
	_, release = acquire(t, c, l)
	release()
	if l.opens.Load() != 2 {
		t.Errorf("opened %d times, want 2", l.opens.Load())
	}
}

func TestCacheRefusesBadDigests(t *testing.T) {
	c := openCache(t, t.TempDir(), CacheOptions{})
	for _, d := range []string{"", "sha256:", "sha256:../../etc", "sha512:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("a", 63) + "/"} {
		if _, _, err := c.Acquire(context.Background(), Blob{Digest: d}); !errors.Is(err, ErrBadDigest) {
			t.Errorf("%q: %v, want ErrBadDigest", d, err)
		}
		if err := c.Remove(d); !errors.Is(err, ErrBadDigest) {
			t.Errorf("remove %q: %v, want ErrBadDigest", d, err)
		}
	}
}

func TestCacheClosed(t *testing.T) {
	c := openCache(t, t.TempDir(), CacheOptions{})
	c.Close()
	if _, _, err := c.Acquire(context.Background(), Blob{Digest: "sha256:" + strings.Repeat("a", 64)}); !errors.Is(err, ErrClosed) {
		t.Errorf("acquire after close: %v", err)
	}
}
