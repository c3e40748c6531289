package content

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// SourceStats is what one source of a many-source fetch sent.
type SourceStats struct {
	Peer   peer.ID
	Blocks int
	Bytes  int64
	// Err is why the fetch stopped asking this source (it refused, died
	// or sent bad data); nil if it served until the end.
	Err error
}

// batchesPerSource is how many batches each source's share of the missing
// leaves is cut into: enough that a fast source takes more of them than a
// slow one, and that a source dying costs the others only a batch.
const batchesPerSource = 4

// maxBatch bounds a batch (in blocks: 1 MiB leaves make it 64 MiB).
const maxBatch = 64

// maxFetchRounds bounds the passes over what is still missing: each pass
// rescans the DAG, so one that found a subtree's node but lost its leaves
// asks for them again, from the sources still alive.
const maxFetchRounds = 3

// FetchFrom makes the whole DAG under root local, fetching what is missing
// from every source at once: the structure (dag-pb nodes) from the first
// source that serves it, then the missing leaves split in batches that the
// sources take from one queue, so that a faster source serves more. A
// source that refuses, fails or stalls is dropped; what it had not yet
// delivered of its batch goes back to the queue for the others. A block
// already held is never asked for, so nothing moves twice, and every block
// is hash-checked on arrival. The fetch fails only when no source is left
// and blocks are still missing; what arrived stays for a retry.
//
// The sources in o.Fallback are asked only once every other source is
// gone: they serve what the others could not.
//
// FetchFrom speaks only the bulk protocol; a source without it is dropped.
// With one source and no fallback it is Fetch, which falls back to bitswap.
func (e *Exchange) FetchFrom(ctx context.Context, sources []peer.ID, root cid.Cid, o FetchOptions) (FetchStats, error) {
	srcs := make([]peer.ID, 0, len(sources)+len(o.Fallback))
	primary := 0
	for i, p := range slices.Concat(sources, o.Fallback) {
		if p != "" && p != e.h.ID() && !slices.Contains(srcs, p) {
			srcs = append(srcs, p)
			if i < len(sources) {
				primary++
			}
		}
	}
	if primary == 0 {
		primary = len(srcs) // only fallbacks: they are the sources
	}
	switch len(srcs) {
	case 0:
		// This node is the only source named (a job it submitted and
		// leased to itself): what it needs must be here already.
		return e.fetch(ctx, "", root, o, methodNone)
	case 1:
		st, err := e.fetch(ctx, srcs[0], root, o, methodAuto)
		st.Sources = []SourceStats{{Peer: srcs[0], Blocks: st.BlocksFetched, Bytes: st.BytesFetched, Err: err}}
		return st, err
	}

	start := time.Now()
	st := FetchStats{Method: "local"}
	f := &manyFetch{e: e, root: root, maxBytes: o.MaxBytes, p: lockedProgress{p: o.Progress}}
	for i, p := range srcs {
		f.sources = append(f.sources, &SourceStats{Peer: p})
		f.fallback = append(f.fallback, i >= primary)
	}
	fail := func(err error) (FetchStats, error) {
		f.fill(&st)
		st.Duration = time.Since(start)
		return st, fmt.Errorf("fetch %s from %d sources: %w", root, len(srcs), err)
	}
	if err := e.ctx.Err(); err != nil {
		return fail(ErrClosed)
	}
	e.s.gcMu.RLock()
	defer e.s.gcMu.RUnlock()

	sc, err := e.s.scan(ctx, root)
	if err != nil {
		return fail(err)
	}
	for round := 0; len(sc.missing) > 0; round++ {
		st.Method = "bulk"
		if round == maxFetchRounds {
			return fail(fmt.Errorf("%w: %d subtrees still missing after %d rounds, first %s", ErrIncomplete, len(sc.missing), round, sc.missing[0]))
		}
		if err := f.round(ctx, sc.missing); err != nil {
			if !errors.Is(err, errNoSource) || len(f.alive()) == 0 {
				return fail(err)
			}
			// The sources asked are gone; the fallbacks take over.
		}
		if sc, err = e.s.scan(ctx, root); err != nil {
			return fail(err)
		}
	}
	if f.maxBytes > 0 && f.total > f.maxBytes {
		return fail(fmt.Errorf("%w: the sources sent %d bytes, over the cap of %d bytes", ErrTooLarge, f.total, f.maxBytes))
	}
	if err := e.s.commit(root, sc.held, o.Pin); err != nil {
		return fail(err)
	}
	f.fill(&st)
	st.Blocks, st.Bytes = len(sc.held), sc.bytes
	st.Duration = time.Since(start)
	return st, nil
}

// manyFetch is one FetchFrom in progress.
type manyFetch struct {
	e        *Exchange
	root     cid.Cid
	maxBytes int64
	p        lockedProgress

	mu       sync.Mutex     // guards sources' counters and errors, and total
	sources  []*SourceStats // in the caller's order, fallbacks last
	fallback []bool         // by index of sources; immutable
	total    int64          // bytes received from all sources
}

func (f *manyFetch) fill(st *FetchStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sources {
		st.Sources = append(st.Sources, *s)
		st.BlocksFetched += s.Blocks
		st.BytesFetched += s.Bytes
	}
}

// alive returns the sources to ask now: those not yet dropped, fallbacks
// only when no other is left.
func (f *manyFetch) alive() []*SourceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out, fb []*SourceStats
	for i, s := range f.sources {
		switch {
		case s.Err != nil:
		case f.fallback[i]:
			fb = append(fb, s)
		default:
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return fb
	}
	return out
}

// account records what a round from s moved, and drops s on err.
func (f *manyFetch) account(s *SourceStats, t transfer, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Blocks += t.blocks
	s.Bytes += t.bytes
	f.total += t.bytes
	if err != nil && s.Err == nil {
		s.Err = err
	}
}

// left is the byte cap for the next request: what the fetch may still take.
func (f *manyFetch) left() int64 {
	if f.maxBytes <= 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.maxBytes-f.total, 1)
}

// errNoSource means no source is left to ask for what is missing: every
// one asked was dropped, or none but this node was named.
var errNoSource = errors.New("no source left")

// noSource is the error once every source asked is dropped.
func (f *manyFetch) noSource() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := []error{errNoSource}
	for _, s := range f.sources {
		errs = append(errs, fmt.Errorf("%s: %w", s.Peer, s.Err))
	}
	return errors.Join(errs...)
}

// round fetches the missing subtrees: their structure first, from one
// source, then their leaves from all.
func (f *manyFetch) round(ctx context.Context, missing []cid.Cid) error {
	if slices.ContainsFunc(missing, func(c cid.Cid) bool { return c.Type() == cid.DagProtobuf }) {
		got := false
		for _, s := range f.alive() {
			t, err := f.e.bulkRound(ctx, s.Peer, bulkRequest{structure: true, root: f.root, wants: missing}, f.left(), nil)
			if ctx.Err() != nil {
				f.account(s, t, nil)
				return ctx.Err()
			}
			f.account(s, t, err)
			if err == nil {
				got = true
				break
			}
			f.e.log.Info("source dropped", "peer", s.Peer, "root", f.root, "err", err)
		}
		if !got {
			return f.noSource()
		}
		sc, err := f.e.s.scan(ctx, f.root)
		if err != nil {
			return err
		}
		missing = sc.missing
		progressStart(&f.p, sc.missingBytes, fmt.Sprintf("fetch %s from %d sources", f.root, len(f.sources)))
		defer progressDone(&f.p)
	}
	if len(missing) == 0 {
		return nil
	}
	alive := f.alive()
	if len(alive) == 0 {
		return f.noSource()
	}
	return f.leaves(ctx, alive, missing)
}

// leaves fetches the wanted blocks (and their subtrees) from the sources,
// in batches taken from one queue.
func (f *manyFetch) leaves(ctx context.Context, alive []*SourceStats, wants []cid.Cid) error {
	size := min(maxBatch, max(1, (len(wants)+len(alive)*batchesPerSource-1)/(len(alive)*batchesPerSource)))
	q := &batchQueue{}
	for b := range slices.Chunk(wants, size) {
		q.batches = append(q.batches, b)
	}
	q.pending = len(q.batches)
	q.workers = len(alive)
	q.cond = sync.NewCond(&q.mu)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, q.wake)
	defer stop()

	var wg sync.WaitGroup
	for _, s := range alive {
		wg.Go(func() {
			defer q.leave()
			for {
				b, ok := q.take(ctx)
				if !ok {
					return
				}
				t, err := f.e.bulkRound(ctx, s.Peer, bulkRequest{root: f.root, wants: b}, f.left(), &f.p)
				if err == nil {
					f.account(s, t, nil)
					q.finish(nil)
					continue
				}
				if ctx.Err() != nil {
					f.account(s, t, nil)
					q.finish(b) // nobody will take it: the fetch is over
					return
				}
				f.account(s, t, err)
				f.e.log.Info("source dropped", "peer", s.Peer, "root", f.root, "blocks", t.blocks, "err", err)
				rest, herr := f.unheld(b)
				if herr != nil {
					rest = b // when in doubt ask again: a held block is skipped on write
				}
				q.finish(rest)
				return
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.pending > 0 {
		return f.noSource()
	}
	return nil
}

// unheld returns the blocks of b not held now.
func (f *manyFetch) unheld(b []cid.Cid) ([]cid.Cid, error) {
	var rest []cid.Cid
	for _, c := range b {
		_, held, err := f.e.s.blockSize(c)
		if err != nil {
			return nil, err
		}
		if !held {
			rest = append(rest, c)
		}
	}
	return rest, nil
}

// batchQueue hands batches of wants to the sources' workers. A batch is
// pending from the start until a worker delivers it or every worker is
// gone; a worker whose source fails puts back what it did not deliver.
type batchQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	batches [][]cid.Cid // waiting to be taken
	pending int         // batches not yet delivered
	workers int         // workers still running
}

// take returns the next batch, waiting while batches are out with other
// workers (one of them may fail and put its batch back); false once every
// batch is delivered, or ctx ends.
func (q *batchQueue) take(ctx context.Context) ([]cid.Cid, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.batches) == 0 && q.pending > 0 && ctx.Err() == nil {
		q.cond.Wait()
	}
	if len(q.batches) == 0 || ctx.Err() != nil {
		return nil, false
	}
	b := q.batches[0]
	q.batches = q.batches[1:]
	return b, true
}

// finish ends a taken batch: delivered when rest is empty, else rest goes
// back to the queue.
func (q *batchQueue) finish(rest []cid.Cid) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(rest) == 0 {
		q.pending--
	} else {
		q.batches = append(q.batches, rest)
	}
	q.cond.Broadcast()
}

// leave marks a worker gone.
func (q *batchQueue) leave() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.workers--
	q.cond.Broadcast()
}

func (q *batchQueue) wake() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cond.Broadcast()
}

// lockedProgress serialises the reports of parallel rounds into one sink.
type lockedProgress struct {
	mu sync.Mutex
	p  Progress
}

func (l *lockedProgress) Start(total int64, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	progressStart(l.p, total, what)
}

func (l *lockedProgress) Add(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	progressAdd(l.p, n)
}

func (l *lockedProgress) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	progressDone(l.p)
}
