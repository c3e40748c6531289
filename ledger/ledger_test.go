package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func indexes(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Index
	}
	return out
}

func TestAppendChainsEntries(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{})
	es := mustAppend(t, l, leaseChain(t, "lease-1", "job-1", prov, sub, 3, true)...)
	for i, e := range es {
		if e.Index != uint64(i+1) {
			t.Fatalf("entry %d has index %d", i, e.Index)
		}
		if i == 0 && e.Prev != "" || i > 0 && e.Prev != es[i-1].Hash {
			t.Fatalf("entry %d: prev %q does not link to %q", e.Index, e.Prev, es[max(i-1, 0)].Hash)
		}
	}
	h, err := l.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Index != 3 || h.Hash != es[2].Hash {
		t.Fatalf("head %+v, want index 3 hash %s", h, es[2].Hash)
	}
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != 3 {
		t.Fatalf("verify: %+v", rep)
	}
}

func TestAppendRefusesUnverified(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	l := openMem(t, Options{})
	ctx := context.Background()

	unsigned := interim("lease-1", "job-1", prov, sub, 0, "")
	providerOnly := unsigned
	if err := providerOnly.SignProvider(prov.sk); err != nil {
		t.Fatal(err)
	}
	forged := sign(t, unsigned, prov, sub)
	forged.SubmitterSig, _ = other.sk.Sign(forged.SigningBytes())
	edited := sign(t, unsigned, prov, sub)
	edited.GPUs = 8
	invalid := sign(t, unsigned, prov, sub)
	invalid.HeldUntil = invalid.HeldFrom.Add(-time.Second)

	for name, c := range map[string]struct {
		r    Receipt
		want error
	}{
		"unsigned":      {unsigned, ErrUnsigned},
		"provider only": {providerOnly, ErrUnsigned},
		"forged":        {forged, ErrBadSignature},
		"edited":        {edited, ErrBadSignature},
		"invalid":       {invalid, ErrInvalidReceipt},
	} {
		if _, err := l.Append(ctx, c.r); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if all, err := l.All(ctx); err != nil || len(all) != 0 {
		t.Fatalf("refused receipts were stored: %d entries, %v", len(all), err)
	}
}

func TestAppendIdempotent(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{})
	rs := leaseChain(t, "lease-1", "job-1", prov, sub, 2, false)
	first := mustAppend(t, l, rs...)

	// Again, one at a time and all at once: same entries, nothing added.
	again := mustAppend(t, l, rs[1])
	if again[0].Hash != first[1].Hash || again[0].Index != first[1].Index {
		t.Fatalf("re-append gave %+v, want the stored entry %+v", again[0], first[1])
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if e, err := l.Append(context.Background(), rs[0]); err != nil || e.Index != 1 {
				t.Errorf("concurrent re-append: index %d, %v", e.Index, err)
			}
		})
	}
	wg.Wait()
	if h, _ := l.Head(context.Background()); h.Index != 2 {
		t.Fatalf("head index %d after re-appends, want 2", h.Index)
	}
}

func TestAppendConflicts(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	rs := leaseChain(t, "lease-1", "job-1", prov, sub, 3, true) // seq 0, 1, final 2
	resign := func(r Receipt, f func(*Receipt)) Receipt {
		f(&r)
		return sign(t, r, prov, sub)
	}
	cases := map[string]struct {
		stored []Receipt
		add    Receipt
	}{
		"different receipt, same seq": {rs[:1], resign(rs[0], func(r *Receipt) { r.HeldUntil = r.HeldUntil.Add(time.Second) })},
		"prev does not match":         {rs[:1], resign(rs[1], func(r *Receipt) { r.Prev = rs[1].Digest() })},
		"next does not link back":     {rs[1:2], resign(rs[0], func(r *Receipt) { r.HeldUntil = r.HeldUntil.Add(time.Second) })},
		"job changes mid-lease":       {rs[:1], resign(rs[1], func(r *Receipt) { r.Job = "job-2" })},
		"gpus change mid-lease":       {rs[:1], resign(rs[1], func(r *Receipt) { r.GPUs = 4 })},
		"held_until goes back": {rs[:1], resign(rs[1], func(r *Receipt) {
			r.HeldUntil = rs[0].HeldUntil.Add(-time.Second)
		})},
		"after the final": {rs, resign(interim("lease-1", "job-1", prov, sub, 3, rs[2].Digest()), func(*Receipt) {})},
		"second final":    {rs, resign(final(interim("lease-1", "job-1", prov, sub, 5, rs[2].Digest())), func(*Receipt) {})},
		"final below a stored seq": {rs[:2], resign(final(interim("lease-1", "job-1", prov, sub, 0, "")),
			func(*Receipt) {})},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := openMem(t, Options{})
			mustAppend(t, l, c.stored...)
			if _, err := l.Append(context.Background(), c.add); !errors.Is(err, ErrConflict) {
				t.Fatalf("%v, want ErrConflict", err)
			}
			if rep := mustVerify(t, l); !rep.OK || rep.Entries != len(c.stored) {
				t.Fatalf("after a refused append: %+v", rep)
			}
		})
	}
}

// TestAppendOutOfOrder: a node that missed receipts still stores the ones
// it gets, in any order.
func TestAppendOutOfOrder(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	rs := leaseChain(t, "lease-1", "job-1", prov, sub, 5, true)
	l := openMem(t, Options{})
	mustAppend(t, l, rs[4], rs[1], rs[0], rs[3])
	got, err := l.ByLease(context.Background(), "lease-1")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range got {
		seqs = append(seqs, e.Receipt.Seq)
	}
	if !slices.Equal(seqs, []uint64{0, 1, 3, 4}) {
		t.Fatalf("ByLease seqs %v, want [0 1 3 4]", seqs)
	}
}

func TestQueries(t *testing.T) {
	a, b, c := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	l := openMem(t, Options{})
	ctx := context.Background()
	mustAppend(t, l, leaseChain(t, "lease-1", "job-1", a, b, 2, true)...)  // 1, 2
	mustAppend(t, l, leaseChain(t, "lease-2", "job-2", c, a, 1, false)...) // 3
	mustAppend(t, l, leaseChain(t, "lease-3", "job-1", b, c, 3, false)...) // 4, 5, 6

	check := func(name string, es []Entry, err error, want ...uint64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := indexes(es); !slices.Equal(got, want) {
			t.Errorf("%s: entries %v, want %v", name, got, want)
		}
	}
	es, err := l.ByJob(ctx, "job-1")
	check("ByJob job-1", es, err, 1, 2, 4, 5, 6)
	es, err = l.ByJob(ctx, "job")
	check("ByJob of a prefix of a job ID", es, err)
	es, err = l.ByLease(ctx, "lease-3")
	check("ByLease lease-3", es, err, 4, 5, 6)
	es, err = l.ByPeer(ctx, a.id)
	check("ByPeer a", es, err, 1, 2, 3)
	es, err = l.ByPeer(ctx, c.id)
	check("ByPeer c", es, err, 3, 4, 5, 6)
	es, err = l.All(ctx)
	check("All", es, err, 1, 2, 3, 4, 5, 6)
	if es[1].Receipt.Outcome != OutcomeCompleted || *es[1].Receipt.ExitCode != 0 {
		t.Errorf("final receipt read back as %+v", es[1].Receipt)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	dir := t.TempDir()
	ctx := context.Background()
	l, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := leaseChain(t, "lease-1", "job-1", prov, sub, 4, true)
	before := mustAppend(t, l, rs[:3]...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	after, err := l.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 3 {
		t.Fatalf("%d entries after reopening, want 3", len(after))
	}
	for i := range after {
		if after[i].Hash != before[i].Hash || after[i].Receipt.Digest() != before[i].Receipt.Digest() {
			t.Fatalf("entry %d changed across reopening", i+1)
		}
	}
	if rep := mustVerify(t, l); !rep.OK {
		t.Fatalf("verify after reopening: %+v", rep)
	}
	// The chain continues where it stopped, and idempotency survives.
	e := mustAppend(t, l, rs[3], rs[0])
	if e[0].Index != 4 || e[0].Prev != before[2].Hash || e[1].Index != 1 {
		t.Fatalf("appends after reopening: %+v", indexes(e))
	}
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != 4 {
		t.Fatalf("verify: %+v", rep)
	}
}

func TestSecondOpenOfDirFails(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l2, err := Open(context.Background(), dir, Options{}); err == nil {
		l2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
}

func TestClose(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	ctx := context.Background()
	l, err := Open(ctx, "", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, leaseChain(t, "lease-1", "job-1", prov, sub, 1, false)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	r := leaseChain(t, "lease-2", "job-1", prov, sub, 1, false)[0]
	if _, err := l.Append(ctx, r); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := l.Verify(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close: %v, want ErrClosed", err)
	}
}

// TestCloseWaitsForAppends: every Append that Close races with either is
// stored and verifiable or reports ErrClosed; none hangs.
func TestCloseWaitsForAppends(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	dir := t.TempDir()
	ctx := context.Background()
	l, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rs []Receipt
	for i := range 64 {
		rs = append(rs, leaseChain(t, fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 1, false)...)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stored int
	)
	for _, r := range rs {
		wg.Go(func() {
			_, err := l.Append(ctx, r)
			switch {
			case err == nil:
				mu.Lock()
				stored++
				mu.Unlock()
			case !errors.Is(err, ErrClosed):
				t.Errorf("append racing Close: %v", err)
			}
		})
	}
	time.Sleep(time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	l, err = Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != stored {
		t.Fatalf("after racing Close: %+v, %d appends succeeded", rep, stored)
	}
}

func TestGroupCommit(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	l, err := Open(context.Background(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 200
	var rs []Receipt
	for i := range n {
		rs = append(rs, leaseChain(t, fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 1, false)...)
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if _, err := l.Append(context.Background(), r); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := l.appended.Load(); got != n {
		t.Fatalf("%d entries committed, want %d", got, n)
	}
	if c := l.commits.Load(); c >= n {
		t.Errorf("%d commits for %d concurrent appends: nothing was batched", c, n)
	}
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != n {
		t.Fatalf("verify: %+v", rep)
	}
}

// TestNoGoroutineLeak: after Close, the writer and Badger's goroutines are
// gone.
func TestNoGoroutineLeak(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	before := runtime.NumGoroutine()
	for _, inMemory := range []bool{true, false} {
		l, err := Open(context.Background(), t.TempDir(), Options{InMemory: inMemory})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, leaseChain(t, "lease-1", "job-1", prov, sub, 2, true)...)
		mustVerify(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before Open, %d after Close:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAppendHonoursContext(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, leaseChain(t, "lease-1", "job-1", prov, sub, 1, false)[0]); err != nil &&
		!errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: %v", err)
	}
	if _, err := l.All(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("All with a cancelled context: %v", err)
	}
}

// TestBatchSplitsLargeTransactions drives the writer's batching directly
// with more bytes than one Badger transaction may carry: the batch must be
// committed in several transactions, each answered, and the chain whole.
func TestBatchSplitsLargeTransactions(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).
		WithMemTableSize(memTableSize).WithValueThreshold(valueThreshold).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := &Ledger{db: db, log: slog.New(slog.DiscardHandler)}

	var batch []*appendReq
	bytes := 0
	for i := 0; bytes < 3*maxTxnBytes; i++ {
		r := final(interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, ""))
		r.Reason = strings.Repeat("<", maxReasonLen) // six bytes each in JSON
		p, err := l.prepare(sign(t, r, prov, sub))
		if err != nil {
			t.Fatal(err)
		}
		bytes += p.estimate
		batch = append(batch, &appendReq{p: p, done: make(chan appendResult, 1)})
	}
	// The last one repeats the first: it must find it in an earlier commit.
	batch = append(batch, &appendReq{p: batch[0].p, done: make(chan appendResult, 1)})

	h := l.commitBatch(chainHead{}, batch)
	if want := uint64(len(batch) - 1); h.index != want {
		t.Fatalf("head index %d, want %d", h.index, want)
	}
	if c := l.commits.Load(); c < 3 {
		t.Fatalf("%d commits for %d bytes, want at least 3", c, bytes)
	}
	for i, req := range batch {
		res := <-req.done
		want := uint64(i + 1)
		if i == len(batch)-1 {
			want = 1
		}
		if res.err != nil || res.entry.Index != want {
			t.Fatalf("request %d: entry %d, %v; want entry %d", i, res.entry.Index, res.err, want)
		}
	}
	var rep VerifyReport
	err = db.View(func(txn *badger.Txn) error {
		rep, err = verifyChain(context.Background(), txn, 1)
		return err
	})
	if err != nil || !rep.OK || rep.Entries != len(batch)-1 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}
