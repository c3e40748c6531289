package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// testLog writes warnings to stderr. Not t.Output: serving goroutines may
// log after a test has returned.
func testLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openStore(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dir, StoreOptions{Log: testLog()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// node is one peer: a libp2p host on loopback TCP only (no relay, no NAT
// port mapping, so tests send nothing beyond this machine), a store on disk
// and an exchange.
type node struct {
	h host.Host
	s *Store
	x *Exchange
}

func newNode(tb testing.TB, access Access, stall time.Duration) *node {
	tb.Helper()
	n := startNode(tb, access, stall, tb.TempDir())
	tb.Cleanup(n.close)
	return n
}

// startNode starts a node with its store in dir; the caller closes it.
func startNode(tb testing.TB, access Access, stall time.Duration, dir string) *node {
	tb.Helper()
	return startNodeWith(tb, access, stall, dir, ExchangeOptions{})
}

// startNodeWith is startNode with more exchange options.
func startNodeWith(tb testing.TB, access Access, stall time.Duration, dir string, o ExchangeOptions) *node {
	tb.Helper()
	h, err := libp2p.New(
		libp2p.NoTransports,
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.DisableRelay(),
	)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Open(context.Background(), dir, StoreOptions{Log: testLog()})
	if err != nil {
		tb.Fatal(err)
	}
	o.Log, o.StallTimeout = testLog(), stall
	x, err := NewExchange(context.Background(), h, s, access, o)
	if err != nil {
		tb.Fatal(err)
	}
	return &node{h: h, s: s, x: x}
}

func (n *node) close() {
	_ = n.x.Close()
	_ = n.h.Close()
	_ = n.s.Close()
}

func connect(tb testing.TB, a, b *node) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// allowOnly allows the listed peers every root.
func allowOnly(ps ...peer.ID) Access {
	return AccessFunc(func(p peer.ID, _ cid.Cid) bool {
		for _, q := range ps {
			if p == q {
				return true
			}
		}
		return false
	})
}

// access is a mutable allow list of (peer, root), like a node's view of its
// jobs and leases.
type access struct {
	mu sync.Mutex
	m  map[peer.ID]map[cid.Cid]bool
}

func (a *access) allow(p peer.ID, root cid.Cid) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[peer.ID]map[cid.Cid]bool{}
	}
	if a.m[p] == nil {
		a.m[p] = map[cid.Cid]bool{}
	}
	a.m[p][root] = true
}

func (a *access) Allowed(p peer.ID, root cid.Cid) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[p][root]
}

// writeRandom writes n pseudo-random bytes (incompressible, reproducible).
func writeRandom(tb testing.TB, path string, n int64, seed uint64, mode fs.FileMode) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	r := rand.NewChaCha8(key)
	if _, err := io.CopyN(f, r, n); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

func mkdir(tb testing.TB, path string, mode fs.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

// makeTree builds a job-input-like tree of about bigMiB MiB plus small
// files: nested directories, an empty directory, an executable, odd modes,
// and files of 0, 1, chunk-1, chunk, chunk+1 bytes.
func makeTree(tb testing.TB, dir string, bigMiB int64) {
	tb.Helper()
	mkdir(tb, dir, 0o755)
	mkdir(tb, filepath.Join(dir, "empty"), 0o755)
	mkdir(tb, filepath.Join(dir, "a", "b", "c"), 0o755)
	mkdir(tb, filepath.Join(dir, "private"), 0o700)
	mkdir(tb, filepath.Join(dir, "bin"), 0o755)
	writeRandom(tb, filepath.Join(dir, "bin", "run.sh"), 300, 1, 0o755)
	writeRandom(tb, filepath.Join(dir, "bin", "train"), 3*chunkSize+12345, 2, 0o755)
	writeRandom(tb, filepath.Join(dir, "zero"), 0, 3, 0o644)
	writeRandom(tb, filepath.Join(dir, "zero-exec"), 0, 3, 0o755)
	writeRandom(tb, filepath.Join(dir, "one"), 1, 4, 0o644)
	writeRandom(tb, filepath.Join(dir, "a", "chunk-1"), chunkSize-1, 5, 0o644)
	writeRandom(tb, filepath.Join(dir, "a", "chunk"), chunkSize, 6, 0o600)
	writeRandom(tb, filepath.Join(dir, "a", "b", "chunk+1"), chunkSize+1, 7, 0o444)
	writeRandom(tb, filepath.Join(dir, "a", "b", "c", "small.txt"), 4096, 8, 0o640)
	writeRandom(tb, filepath.Join(dir, "private", "key"), 64, 9, 0o600)
	// The bulk of the bytes, in a few files of different sizes.
	left := bigMiB << 20
	for i := uint64(0); left > 0; i++ {
		n := min(left, int64(40-(i%3)*13)<<20+int64(i)*777)
		writeRandom(tb, filepath.Join(dir, "a", "b", "data-"+string(rune('0'+i))), n, 100+i, 0o644)
		left -= n
	}
}

type entry struct {
	mode fs.FileMode
	size int64
	hash [32]byte
}

// readTree describes every entry under dir by relative path.
func readTree(tb testing.TB, dir string) map[string]entry {
	tb.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode()}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			e.size = n
			copy(e.hash[:], h.Sum(nil))
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func sameTree(tb testing.TB, want, got string) {
	tb.Helper()
	a, b := readTree(tb, want), readTree(tb, got)
	for p, ea := range a {
		eb, ok := b[p]
		if !ok {
			tb.Errorf("%s missing after round trip", p)
			continue
		}
		if ea.mode != eb.mode {
			tb.Errorf("%s: mode %v, want %v", p, eb.mode, ea.mode)
		}
		if ea.size != eb.size || !bytes.Equal(ea.hash[:], eb.hash[:]) {
			tb.Errorf("%s: content differs (%d bytes, want %d)", p, eb.size, ea.size)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			tb.Errorf("%s appeared in the round trip", p)
		}
	}
}

// counter is a Progress that records what it is told.
type counter struct {
	mu      sync.Mutex
	total   int64
	n       int64
	starts  int
	dones   int
	onFirst func() // called (once) on the first Add
}

func (c *counter) Start(total int64, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total = total
	c.starts++
}

func (c *counter) Add(n int64) {
	c.mu.Lock()
	f := c.onFirst
	c.onFirst = nil
	c.n += n
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

func (c *counter) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dones++
}

// corruptBlock overwrites the stored bytes of c, as a failing disk would.
func corruptBlock(tb testing.TB, s *Store, c cid.Cid) {
	tb.Helper()
	var data []byte
	if err := s.viewBlock(c, func(v []byte) error { data = bytes.Clone(v); return nil }); err != nil {
		tb.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	var loc *packLoc
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		_, loc, _, err = sizeRecord(txn, c)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if loc != nil {
		f, err := os.OpenFile(s.packs.path(loc.pack), os.O_WRONLY, 0)
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(data, loc.off); err != nil {
			tb.Fatal(err)
		}
		return
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(key(kindBlock, c.Hash()), data)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// countBlocks counts block records in s.
func countBlocks(tb testing.TB, s *Store) int {
	tb.Helper()
	n := 0
	if err := s.scanPrefix(context.Background(), []byte{kindSize, '/'}, func([]byte) error { n++; return nil }); err != nil {
		tb.Fatal(err)
	}
	return n
}
