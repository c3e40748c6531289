package content

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// pairOptions configure newPair. Zero stalls take the exchange's default.
type pairOptions struct {
	senderStall, receiverStall time.Duration
}

// newPair is the fixture of a fetch test: a sender that serves what acc
// allows, and a receiver, connected to it, that serves nothing. Both close
// when the test ends.
func newPair(tb testing.TB, o pairOptions) (acc *access, sender, receiver *node) {
	tb.Helper()
	acc = &access{}
	sender = newNode(tb, acc, o.senderStall)
	receiver = newNode(tb, allowOnly(), o.receiverStall)
	connect(tb, receiver, sender)
	return acc, sender, receiver
}

func TestFetchRoundTrip100MiB(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{})

	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 100)
	root, n, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input of job J"})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100<<20 {
		t.Fatalf("imported %d bytes", n)
	}
	acc.allow(receiver.h.ID(), root)

	var p counter
	st, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input of job J", Progress: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched %d blocks, %d bytes in %v via %s (%.0f MiB/s)", st.BlocksFetched, st.BytesFetched, st.Duration, st.Method,
		float64(st.BytesFetched)/(1<<20)/st.Duration.Seconds())
	if st.Method != "bulk" || st.BlocksFetched != st.Blocks || st.BytesFetched != st.Bytes {
		t.Errorf("first fetch stats %+v, want every block over bulk", st)
	}
	// Progress counts file data; the structure comes first, uncounted.
	if p.total != p.n || p.n < 100<<20 || p.n > st.Bytes || p.dones != 1 {
		t.Errorf("progress total %d count %d dones %d; fetched %d", p.total, p.n, p.dones, st.Bytes)
	}
	size, err := sender.s.Size(ctx, root)
	if err != nil || size != st.Bytes {
		t.Errorf("sender Size = %d, %v; fetched %d", size, err, st.Bytes)
	}
	pins, err := receiver.s.Pins(ctx)
	if err != nil || len(pins) != 1 || pins[0].Root != root {
		t.Errorf("receiver pins %v, %v", pins, err)
	}

	dst := filepath.Join(t.TempDir(), "out")
	if err := receiver.s.Export(ctx, root, dst, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, dst)

	// Staging the same input again moves nothing.
	st, err = receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input of job J2"})
	if err != nil {
		t.Fatal(err)
	}
	if st.BlocksFetched != 0 || st.BytesFetched != 0 || st.Method != "local" {
		t.Errorf("re-fetch stats %+v, want nothing fetched", st)
	}
}

func TestFetchOnlyMissing(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{})

	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 8)
	root, _, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	// The receiver already has one big file of the tree, from elsewhere.
	part, _, err := receiver.s.Import(ctx, filepath.Join(src, "a", "b", "data-0"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	partSize, err := receiver.s.Size(ctx, part)
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.s.Pin(ctx, part, "held"); err != nil {
		t.Fatal(err)
	}
	for _, fetch := range []func(context.Context, peer.ID, cid.Cid, FetchOptions) (FetchStats, error){
		receiver.x.Fetch, receiver.x.FetchBitswap,
	} {
		st, err := fetch(ctx, sender.h.ID(), root, FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The held file's root node may come again with the structure
		// (bulk); its leaves must not.
		if st.Method == "local" || st.BytesFetched < st.Bytes-partSize || st.BytesFetched > st.Bytes-partSize+4096 {
			t.Errorf("%s fetched %d bytes; DAG %d, already held %d", st.Method, st.BytesFetched, st.Bytes, partSize)
		}
		// Start over for the other method, keeping the shared file.
		if _, err := receiver.s.GC(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFetchBitswap(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{})

	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 8)
	root, _, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	st, err := receiver.x.FetchBitswap(ctx, sender.h.ID(), root, FetchOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Method != "bitswap" || st.BlocksFetched != st.Blocks {
		t.Errorf("stats %+v", st)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := receiver.s.Export(ctx, root, dst, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, dst)
}

func TestFetchRejectsCorruptBlock(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{senderStall: 2 * time.Second, receiverStall: 2 * time.Second})

	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 4*chunkSize, 1, 0o644)
	root, _, err := sender.s.Import(ctx, p, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	sc, err := sender.s.scan(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	corruptBlock(t, sender.s, sc.held[3])

	_, err = receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input"})
	if !errors.Is(err, ErrInvalidData) {
		t.Fatalf("fetch of corrupt DAG: %v, want ErrInvalidData", err)
	}
	if ok, _ := receiver.s.has(sc.held[3]); ok {
		t.Error("receiver stored the corrupt block")
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 0 {
		t.Errorf("failed fetch left pins %v", pins)
	}
	// Bitswap does not serve a block that fails its check either.
	_, err = receiver.x.FetchBitswap(ctx, sender.h.ID(), root, FetchOptions{Pin: "input"})
	if !errors.Is(err, ErrStalled) {
		t.Errorf("bitswap fetch of corrupt DAG: %v, want ErrStalled", err)
	}
}

func TestStrangerGetsNothing(t *testing.T) {
	ctx := context.Background()
	acc, sender, party := newPair(t, pairOptions{})
	stranger := newNode(t, allowOnly(), time.Second)
	connect(t, stranger, sender)

	p := filepath.Join(t.TempDir(), "secret")
	writeRandom(t, p, 2*chunkSize, 1, 0o600)
	root, _, err := sender.s.Import(ctx, p, ImportOptions{Pin: "input of job S"})
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	writeRandom(t, other, chunkSize, 2, 0o600)
	otherRoot, _, err := sender.s.Import(ctx, other, ImportOptions{Pin: "input of job T"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(party.h.ID(), root)

	_, err = stranger.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{})
	if !errors.Is(err, ErrDenied) {
		t.Errorf("stranger bulk fetch: %v, want ErrDenied", err)
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := stranger.x.FetchBitswap(bctx, sender.h.ID(), root, FetchOptions{})
	if err == nil || st.BlocksFetched != 0 {
		t.Errorf("stranger bitswap fetch: %+v, %v; want failure with no blocks", st, err)
	}
	if n := countBlocks(t, stranger.s); n != 0 {
		t.Errorf("stranger holds %d blocks", n)
	}

	// A party to one root cannot reach another root's blocks through it.
	_, err = party.x.Fetch(ctx, sender.h.ID(), otherRoot, FetchOptions{})
	if !errors.Is(err, ErrDenied) {
		t.Errorf("party fetch of another root: %v, want ErrDenied", err)
	}
	list, _, err := sender.s.sendList(ctx, root, []cid.Cid{otherRoot}, false)
	if err != nil || len(list) != 0 {
		t.Errorf("sendList with a foreign want = %v, %v; want nothing", list, err)
	}
	if sender.x.allowBlock(party.h.ID(), otherRoot) || !sender.x.allowBlock(party.h.ID(), root) {
		t.Error("bitswap filter does not follow the block index")
	}
	if _, err := party.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{}); err != nil {
		t.Errorf("party fetch: %v", err)
	}
}

func TestSenderDiesMidTransfer(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{receiverStall: 5 * time.Second})

	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 32*chunkSize, 1, 0o644)
	root, _, err := sender.s.Import(ctx, p, ImportOptions{Pin: "output of lease L"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)

	// Kill the sender as soon as the first block has arrived.
	pr := counter{onFirst: func() { _ = sender.h.Close() }}
	start := time.Now()
	st, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "output of lease L", Progress: &pr})
	if err == nil {
		t.Fatalf("fetch from a dead sender succeeded: %+v", st)
	}
	t.Logf("error: %v (after %v)", err, time.Since(start))
	if !strings.Contains(err.Error(), sender.h.ID().String()) || !strings.Contains(err.Error(), root.String()) {
		t.Errorf("error %q does not name the peer and root", err)
	}
	if !strings.Contains(err.Error(), "blocks") && !errors.Is(err, ErrStalled) {
		t.Errorf("error %q does not say how far it got", err)
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 0 {
		t.Errorf("failed fetch left pins %v", pins)
	}
	if ok, _ := receiver.s.Has(ctx, root); ok {
		t.Error("receiver claims the whole DAG")
	}
	if pr.dones != 1 {
		t.Errorf("progress Done called %d times", pr.dones)
	}
}

func TestFetchStalls(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{receiverStall: 500 * time.Millisecond})

	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 8*chunkSize, 1, 0o644)
	root, _, err := sender.s.Import(ctx, p, ImportOptions{Pin: "x"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	// With its store closed the sender still answers bitswap, but never
	// with a block.
	if err := sender.s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = receiver.x.FetchBitswap(ctx, sender.h.ID(), root, FetchOptions{Pin: "x"})
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), sender.h.ID().String()) {
		t.Errorf("fetch: %v, want ErrStalled naming the peer", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stall took %v to notice", d)
	}
}

func TestFetchSizeCap(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{})

	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 4)
	root, n, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	capBytes := n / 2
	st, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input", MaxBytes: capBytes})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("bulk fetch over the cap: %v, want ErrTooLarge", err)
	}
	if st.BytesFetched > 64<<10 {
		t.Errorf("bulk fetch over the cap moved %d bytes before refusing", st.BytesFetched)
	}
	st, err = receiver.x.FetchBitswap(ctx, sender.h.ID(), root, FetchOptions{Pin: "input", MaxBytes: capBytes})
	if !errors.Is(err, ErrTooLarge) || st.BytesFetched > capBytes+maxBlockSize {
		t.Fatalf("bitswap fetch over the cap: %+v, %v; want ErrTooLarge", st, err)
	}
	if pins, _ := receiver.s.Pins(ctx); len(pins) != 0 {
		t.Errorf("refused fetch left pins %v", pins)
	}
}

func TestFetchFallsBackToBitswap(t *testing.T) {
	ctx := context.Background()
	acc, sender, receiver := newPair(t, pairOptions{})
	sender.h.RemoveStreamHandler(ProtocolBulk) // a peer that speaks only bitswap

	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 3*chunkSize, 1, 0o755)
	root, _, err := sender.s.Import(ctx, p, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	st, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Method != "bitswap" || st.BlocksFetched != st.Blocks {
		t.Errorf("stats %+v, want every block over bitswap", st)
	}
}
