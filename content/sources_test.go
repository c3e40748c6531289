package content

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// sourceNode is a node whose exchange counts what it serves and can be
// told to die once it has served a given number of blocks.
type sourceNode struct {
	*node
	served   atomic.Int64
	blocks   atomic.Int64
	dieAfter int64 // 0: never
	die      sync.Once
}

func newSource(tb testing.TB, access Access, dieAfter int64, uploadLimit int64) *sourceNode {
	tb.Helper()
	sn := &sourceNode{dieAfter: dieAfter}
	sn.node = startNodeWith(tb, access, 0, tb.TempDir(), ExchangeOptions{
		UploadLimit: uploadLimit,
		Served: func(_ peer.ID, n int64) {
			sn.served.Add(n)
			if b := sn.blocks.Add(1); sn.dieAfter > 0 && b == sn.dieAfter {
				// From another goroutine: closing the host waits for
				// the stream this block is being served on.
				sn.die.Do(func() { go func() { _ = sn.h.Close() }() })
			}
		},
	})
	tb.Cleanup(sn.close)
	return sn
}

// sources imports the same tree into n sources, each allowing the peers the
// access of its own index allows, and returns the root.
func seed(tb testing.TB, src string, srcs ...*sourceNode) cid.Cid {
	tb.Helper()
	var root cid.Cid
	for _, s := range srcs {
		r, _, err := s.s.Import(context.Background(), src, ImportOptions{Pin: "input of job J"})
		if err != nil {
			tb.Fatal(err)
		}
		if root.Defined() && r != root {
			tb.Fatalf("same tree, roots %s and %s", root, r)
		}
		root = r
	}
	return root
}

func ids(srcs ...*sourceNode) []peer.ID {
	var out []peer.ID
	for _, s := range srcs {
		out = append(out, s.h.ID())
	}
	return out
}

// checkOnce checks that the fetch moved every block of the DAG it lacked
// exactly once: the receiver's per-source counts add up to what it lacked,
// and each source that served to the end counted the same bytes as the
// receiver did from it (a source that died may have sent a block that
// never arrived).
func checkOnce(t *testing.T, st FetchStats, lacked int64, srcs ...*sourceNode) {
	t.Helper()
	var got int64
	for _, s := range st.Sources {
		got += s.Bytes
		for _, n := range srcs {
			if n.h.ID() == s.Peer && s.Err == nil && n.served.Load() != s.Bytes {
				t.Errorf("source %s served %d bytes, receiver counted %d from it", s.Peer, n.served.Load(), s.Bytes)
			}
		}
	}
	if got != lacked || st.BytesFetched != lacked {
		t.Errorf("receiver counted %d bytes from its sources (stats %d); it lacked %d", got, st.BytesFetched, lacked)
	}
}

func TestFetchFromThreeSources(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 0)
	var srcs []*sourceNode
	for range 3 {
		s := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
		connect(t, receiver, s.node)
		srcs = append(srcs, s)
	}
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 48)
	root := seed(t, src, srcs...)

	var p counter
	st, err := receiver.x.FetchFrom(ctx, ids(srcs...), root, FetchOptions{Pin: "input of job J", Progress: &p})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sources {
		t.Logf("source %s: %d blocks, %d bytes, err %v", s.Peer, s.Blocks, s.Bytes, s.Err)
		if s.Err != nil || s.Bytes == 0 {
			t.Errorf("source %s sent %d bytes, err %v: want every source to serve", s.Peer, s.Bytes, s.Err)
		}
	}
	checkOnce(t, st, st.Bytes, srcs...)
	if p.dones != 1 || p.n == 0 || p.n > st.Bytes {
		t.Errorf("progress count %d dones %d; fetched %d", p.n, p.dones, st.Bytes)
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 1 || pins[0].Root != root {
		t.Errorf("receiver pins %v", pins)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := receiver.s.Export(ctx, root, dst, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, dst)
}

func TestFetchFromSourceDiesMidTransfer(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 5*time.Second)
	a := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	dying := newSource(t, allowOnly(receiver.h.ID()), 3, 0)
	c := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	for _, s := range []*sourceNode{a, dying, c} {
		connect(t, receiver, s.node)
	}
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 48*chunkSize, 1, 0o644)
	root := seed(t, p, a, dying, c)

	// The dying source is asked first, so it serves the structure (one
	// block) and then dies inside its first batch of leaves.
	st, err := receiver.x.FetchFrom(ctx, ids(dying, a, c), root, FetchOptions{Pin: "input of job J"})
	if err != nil {
		t.Fatal(err)
	}
	d := st.Sources[0]
	t.Logf("dying source: %d blocks, %d bytes, err %v", d.Blocks, d.Bytes, d.Err)
	if d.Err == nil || d.Blocks == 0 {
		t.Errorf("dying source sent %d blocks, err %v: want some blocks, then an error", d.Blocks, d.Err)
	}
	checkOnce(t, st, st.Bytes, a, dying, c)
	if ok, err := receiver.s.Has(ctx, root); !ok || err != nil {
		t.Errorf("receiver Has = %v, %v", ok, err)
	}
}

func TestFetchFromRefusingSource(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 0)
	a := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	refusing := newSource(t, allowOnly(), 0, 0)
	for _, s := range []*sourceNode{a, refusing} {
		connect(t, receiver, s.node)
	}
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 16*chunkSize, 2, 0o644)
	root := seed(t, p, a, refusing)

	st, err := receiver.x.FetchFrom(ctx, ids(refusing, a), root, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Sources[0]; !errors.Is(r.Err, ErrDenied) || r.Bytes != 0 || refusing.served.Load() != 0 {
		t.Errorf("refusing source: %+v, served %d; want ErrDenied and nothing sent", r, refusing.served.Load())
	}
	checkOnce(t, st, st.Bytes, a, refusing)

	// With every source refusing, the fetch fails saying so.
	other := newNode(t, allowOnly(), 0)
	connect(t, other, refusing.node)
	if _, err := other.x.FetchFrom(ctx, []peer.ID{refusing.h.ID(), receiver.h.ID()}, root, FetchOptions{}); !errors.Is(err, ErrDenied) {
		t.Errorf("fetch from refusing sources: %v, want ErrDenied", err)
	}
}

// TestFetchFromResumes interrupts a many-source fetch and runs it again:
// the second moves only what the first did not, from every source.
func TestFetchFromResumes(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 0)
	a := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	b := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	for _, s := range []*sourceNode{a, b} {
		connect(t, receiver, s.node)
	}
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 32*chunkSize, 3, 0o644)
	root := seed(t, p, a, b)

	fctx, cancel := context.WithCancel(ctx)
	pr := counter{onFirst: cancel}
	first, err := receiver.x.FetchFrom(fctx, ids(a, b), root, FetchOptions{Pin: "x", Progress: &pr})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted fetch: %v, want context.Canceled", err)
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 0 {
		t.Errorf("interrupted fetch left pins %v", pins)
	}
	sc, err := receiver.s.scan(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	second, err := receiver.x.FetchFrom(ctx, ids(a, b), root, FetchOptions{Pin: "x"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first moved %d bytes, %d held after it; second moved %d; DAG %d", first.BytesFetched, sc.bytes, second.BytesFetched, second.Bytes)
	if sc.bytes == 0 || second.BytesFetched != second.Bytes-sc.bytes {
		t.Errorf("second fetch moved %d bytes; DAG %d, %d held before it: want exactly what was missing", second.BytesFetched, second.Bytes, sc.bytes)
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 1 {
		t.Errorf("receiver pins %v", pins)
	}
}

func TestUploadLimit(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 0)
	const limit = 8 << 20
	s := newSource(t, allowOnly(receiver.h.ID()), 0, limit)
	connect(t, receiver, s.node)
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 24*chunkSize, 4, 0o644)
	root := seed(t, p, s)
	start := time.Now()
	st, err := receiver.x.Fetch(ctx, s.h.ID(), root, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The limiter's burst (2 blocks) may go at once; the rest must take
	// at least its share of a second at the limit.
	floor := time.Duration(float64(st.BytesFetched-2*maxBlockSize) / limit * float64(time.Second))
	if d := time.Since(start); d < floor {
		t.Errorf("%d bytes in %v at a limit of %d B/s: want at least %v", st.BytesFetched, d, limit, floor)
	}
}

// TestFetchFromFallback: a fallback source serves nothing while another
// source does, and everything once the others refuse.
func TestFetchFromFallback(t *testing.T) {
	ctx := context.Background()
	receiver := newNode(t, allowOnly(), 0)
	other := newNode(t, allowOnly(), 0)
	holder := newSource(t, allowOnly(receiver.h.ID()), 0, 0)
	sub := newSource(t, allowOnly(receiver.h.ID(), other.h.ID()), 0, 0)
	for _, s := range []*sourceNode{holder, sub} {
		connect(t, receiver, s.node)
		connect(t, other, s.node)
	}
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 16*chunkSize, 5, 0o644)
	root := seed(t, p, holder, sub)

	st, err := receiver.x.FetchFrom(ctx, ids(holder), root, FetchOptions{Fallback: ids(sub)})
	if err != nil {
		t.Fatal(err)
	}
	if sub.served.Load() != 0 || len(st.Sources) != 2 || st.Sources[1].Peer != sub.h.ID() {
		t.Errorf("fallback served %d bytes with the holder serving; sources %+v", sub.served.Load(), st.Sources)
	}
	checkOnce(t, st, st.Bytes, holder, sub)

	// The holder refuses the other receiver: the fallback serves it all.
	st, err = other.x.FetchFrom(ctx, ids(holder), root, FetchOptions{Fallback: ids(sub)})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(st.Sources[0].Err, ErrDenied) || st.Sources[1].Bytes != st.Bytes {
		t.Errorf("holder refusing: sources %+v, want all %d bytes from the fallback", st.Sources, st.Bytes)
	}
}

// TestFetchFromSelf: a node named as the only source of data it holds (a
// job it submitted and leased to itself) pins it without a transfer; data
// it lacks fails naming what is missing.
func TestFetchFromSelf(t *testing.T) {
	ctx := context.Background()
	self := newSource(t, allowOnly(), 0, 0)
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 4*chunkSize, 6, 0o644)
	root := seed(t, p, self)

	st, err := self.x.FetchFrom(ctx, nil, root, FetchOptions{Fallback: ids(self), Pin: "input of job S"})
	if err != nil {
		t.Fatalf("fetch of held data from itself: %v", err)
	}
	if st.Method != "local" || st.BytesFetched != 0 || st.Blocks == 0 {
		t.Errorf("fetch from itself: %+v, want a local fetch of every block", st)
	}
	pins, err := self.s.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pins, func(p Pin) bool { return p.Root == root && slices.Contains(p.Reasons, "input of job S") }) {
		t.Errorf("pins after the fetch: %+v", pins)
	}

	other := filepath.Join(t.TempDir(), "g")
	writeRandom(t, other, 2*chunkSize, 7, 0o644)
	lacking := seed(t, other, newSource(t, allowOnly(), 0, 0))
	if _, err := self.x.FetchFrom(ctx, ids(self), lacking, FetchOptions{}); !errors.Is(err, errNoSource) {
		t.Fatalf("fetch of data not held, from itself: %v, want errNoSource", err)
	}
}
