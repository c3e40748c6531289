package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// prepared is a receipt checked and encoded by the caller of Append, so that
// the single writer goroutine only looks up, hashes and writes.
type prepared struct {
	kind     entryKind
	r        Receipt    // the receipt or record; a dispute's Ours
	d        *Dispute   // set on kindDispute
	json     []byte     // the receipt's or dispute's JSON, as stored inside the entry
	content  []byte     // receiptContent: input to the entry hash
	state    leaseState // index left zero until the writer assigns one
	estimate int        // bytes this receipt adds to a transaction
}

// entryKind is what an entry holds.
type entryKind int

const (
	kindReceipt  entryKind = iota // signed by both parties
	kindOneSided                  // a one-sided final record
	kindDispute                   // two versions of a lease's end
	// kindLease is a lease's evidence in an export file (leases.go); no
	// chain entry holds one.
	kindLease
	// kindVerdict is a verdict in an export file (verdict.go); no chain
	// entry holds one.
	kindVerdict
)

func (k entryKind) field() string {
	if k == kindDispute {
		return fieldDispute
	}
	return fieldReceipt
}

type appendReq struct {
	p    *prepared
	done chan appendResult // buffered: the writer never waits on a caller
}

type appendResult struct {
	entry Entry
	err   error
}

// Append stores a receipt both parties have signed. It refuses one that
// fails Validate or Verify, or claims held time its lease's kept terms do
// not allow (KeepLease, CheckHeld), so the ledger holds only receipts a
// third party would accept. A signature this process has just made on r (SignProvider,
// Countersign) is valid by construction and not checked again, as long as
// r is unchanged since. Appending a receipt already stored returns its entry;
// appending a different receipt for the same (lease, seq), or one that does
// not fit the lease's stored receipts, fails with ErrConflict.
//
// Concurrent Appends share synced commits (group commit): Append returns once
// its entry is durable. If ctx ends after the receipt was handed to the
// writer, Append returns ctx's error and the receipt may still be stored;
// appending it again is safe.
//
// A two-sided final receipt settles its lease: one-sided records and
// disputes stored for the lease before it stay in the chain and show as
// superseded (Entry.Superseded, Ledger.Lease).
func (l *Ledger) Append(ctx context.Context, r Receipt) (Entry, error) {
	what := fmt.Sprintf("append lease %s seq %d", r.Lease, r.Seq)
	if r.OneSided() {
		return Entry{}, fmt.Errorf("%s: %w: a one-sided record goes through AppendOneSided", what, ErrInvalidReceipt)
	}
	p, err := l.prepare(r)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := l.checkKept(ctx, &p.r); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	return l.submit(ctx, p, what)
}

// submit hands p to the writer and waits for its entry.
func (l *Ledger) submit(ctx context.Context, p *prepared, what string) (Entry, error) {
	req := &appendReq{p: p, done: make(chan appendResult, 1)}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return Entry{}, ErrClosed
	}
	select {
	case l.reqs <- req:
	case <-ctx.Done():
		l.mu.RUnlock()
		return Entry{}, fmt.Errorf("%s: %w", what, ctx.Err())
	}
	l.mu.RUnlock()
	select {
	case res := <-req.done:
		if res.err != nil {
			return Entry{}, fmt.Errorf("%s: %w", what, res.err)
		}
		return res.entry, nil
	case <-ctx.Done():
		return Entry{}, fmt.Errorf("%s (may yet be stored): %w", what, ctx.Err())
	}
}

func maxSize(r *Receipt) int {
	if r.OneSided() {
		return MaxRecordSize
	}
	return MaxReceiptSize
}

// clean copies what a caller could still change through a shared pointer or
// slice, and drops what the JSON form cannot carry.
func clean(r Receipt) Receipt {
	r.HeldFrom, r.HeldUntil = msTime(r.HeldFrom), msTime(r.HeldUntil)
	if r.ExitCode != nil {
		c := *r.ExitCode
		r.ExitCode = &c
	}
	r.ProviderSig, r.SubmitterSig = slices.Clone(r.ProviderSig), slices.Clone(r.SubmitterSig)
	if r.Evidence != nil {
		r.Evidence = &LeaseEvidence{
			Terms:        slices.Clone(r.Evidence.Terms),
			ProviderSig:  slices.Clone(r.Evidence.ProviderSig),
			SubmitterSig: slices.Clone(r.Evidence.SubmitterSig),
		}
	}
	return r
}

// prepare does all the per-receipt work that needs no store: checks,
// signature verification (the dominant cost), encoding and digests. It runs
// on the caller's goroutine, so many Appends verify in parallel. Each
// signature is checked on its own under crypto/ed25519's rules, never in a
// batch: what a ledger stores must pass every third party's check.
func (l *Ledger) prepare(r Receipt) (*prepared, error) {
	// Store exactly what the JSON form can carry, and nothing the caller can
	// still change through a shared pointer or slice.
	r = clean(r)

	if err := r.Validate(); err != nil {
		return nil, err
	}
	sb := r.SigningBytes()
	pp, err := l.keys.get(r.Provider)
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	sp, err := l.keys.get(r.Submitter)
	if err != nil {
		return nil, fmt.Errorf("submitter: %w", err)
	}
	if err := r.verifyForStore(sb, pp, sp); err != nil {
		return nil, err
	}
	rj, err := r.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	if limit := maxSize(&r); len(rj) > limit {
		return nil, fmt.Errorf("%w: encodes to %d bytes, at most %d", ErrInvalidReceipt, len(rj), limit)
	}
	content := receiptContent(sb, r.ProviderSig, r.SubmitterSig)
	kind := kindReceipt
	if r.OneSided() {
		kind = kindOneSided
	}
	p := &prepared{
		kind:    kind,
		r:       r,
		json:    rj,
		content: content,
		state: leaseState{
			digest:    sha256.Sum256(sb),
			content:   sha256.Sum256(content),
			fixed:     fixedDigest(&r),
			heldUntil: r.HeldUntil.UnixMilli(),
			final:     r.Final,
		},
	}
	if r.Seq > 0 {
		// Validate has checked Prev is 64 hex digits.
		_, _ = hex.Decode(p.state.prev[:], []byte(r.Prev))
	}
	// Entry JSON plus chain fields, and six short keys with Badger's
	// per-key overhead.
	p.estimate = len(rj) + 200 + 6*(64+len(r.Lease)+len(r.Job)+len(r.Provider))
	return p, nil
}

// write is the single writer goroutine. It takes whatever Appends are
// waiting, applies them in one transaction and commits once: a synced commit
// costs a disk flush (≈ 265 µs here) whether it carries one entry or a
// thousand, so batching is what makes throughput. Receipts arriving during a
// flush wait in l.reqs and form the next batch.
func (l *Ledger) write(h chainHead) {
	defer close(l.writerDone)
	batch := make([]*appendReq, 0, maxBatch)
	for req := range l.reqs {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < maxBatch {
			select {
			case more, ok := <-l.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, more)
			default:
				break fill
			}
		}
		h = l.commitBatch(h, batch)
	}
}

// txnBatch is one transaction's worth of a batch: the requests answered only
// once it commits, and the head it will leave.
type txnBatch struct {
	txn     *badger.Txn
	start   chainHead // head before the transaction
	head    chainHead // head after it, if it commits
	bytes   int
	pending []pendingResult
}

type pendingResult struct {
	req *appendReq
	res appendResult
}

func (l *Ledger) commitBatch(h chainHead, batch []*appendReq) chainHead {
	tb := l.newTxnBatch(h)
	for _, req := range batch {
		if tb.bytes > 0 && tb.bytes+req.p.estimate > maxTxnBytes {
			h = l.finish(tb, nil)
			tb = l.newTxnBatch(h)
		}
		e, wrote, err := l.apply(tb.txn, &tb.head, req.p)
		if wrote && err != nil {
			// A write failed midway: the transaction holds part of an entry
			// and must not commit. Fail everything that was riding on it.
			tb.pending = append(tb.pending, pendingResult{req: req})
			h = l.finish(tb, err)
			tb = l.newTxnBatch(h)
			continue
		}
		if wrote {
			tb.bytes += req.p.estimate
		}
		tb.pending = append(tb.pending, pendingResult{req: req, res: appendResult{entry: e, err: err}})
	}
	return l.finish(tb, nil)
}

func (l *Ledger) newTxnBatch(h chainHead) *txnBatch {
	return &txnBatch{txn: l.db.NewTransaction(true), start: h, head: h}
}

// finish commits tb (unless failed is set) and answers its requests. It
// returns the head the chain now has.
func (l *Ledger) finish(tb *txnBatch, failed error) chainHead {
	defer tb.txn.Discard()
	err := failed
	if err == nil && tb.head != tb.start {
		if err = tb.txn.Set([]byte(keyHead), tb.head.encode()); err == nil {
			err = tb.txn.Commit()
		}
		if err == nil {
			l.commits.Add(1)
			l.appended.Add(tb.head.index - tb.start.index)
		}
	}
	if len(tb.pending) > 0 {
		jobs := make([]string, len(tb.pending))
		for i, p := range tb.pending {
			jobs[i] = p.req.p.r.Job
		}
		l.held.forget(jobs)
	}
	if err != nil {
		l.log.Error("ledger commit failed", "entries", len(tb.pending), "err", err)
		err = fmt.Errorf("store: %w", err)
	}
	for _, p := range tb.pending {
		if err != nil {
			p.res = appendResult{err: err}
		}
		p.req.done <- p.res
	}
	if err != nil {
		return tb.start
	}
	return tb.head
}

// apply checks p against the lease's stored receipts and, if it fits, writes
// it as the entry after *h, advancing *h. wrote reports whether anything was
// written to txn, which matters only when err is set.
func (l *Ledger) apply(txn *badger.Txn, h *chainHead, p *prepared) (e Entry, wrote bool, err error) {
	if p.kind != kindReceipt {
		return l.applySide(txn, h, p)
	}
	r := &p.r
	same, found, err := getLeaseState(txn, leaseKey(r.Lease, r.Seq))
	if err != nil {
		return Entry{}, false, err
	}
	if found {
		if same.content != p.state.content {
			return Entry{}, false, fmt.Errorf("%w: a different receipt is stored for this lease and seq", ErrConflict)
		}
		e, err := loadEntry(txn, same.index)
		return e, false, err
	}
	if err := checkLease(txn, p); err != nil {
		return Entry{}, false, err
	}

	index := h.index + 1
	hash := entryHash(h.hash, index, p.content)
	e = Entry{Index: index, Receipt: p.r, Hash: hashHex(hash)}
	if h.index > 0 {
		e.Prev = hashHex(h.hash)
	}
	st := p.state
	st.index = index
	sets := [][2][]byte{
		{entryKey(index), encodeEntry(index, fieldReceipt, p.json, e.Prev, e.Hash)},
		{leaseKey(r.Lease, r.Seq), st.encode()},
		{jobKey(r.Job, index), nil},
		{peerKey(r.Provider, index), nil},
		{timeKey(r.HeldUntil, index), nil},
	}
	if r.Submitter != r.Provider {
		sets = append(sets, [2][]byte{peerKey(r.Submitter, index), nil})
	}
	if r.Final {
		sets = append(sets, [2][]byte{finalKey(r.Lease), encodeUint64(r.Seq)})
	}
	for _, kv := range sets {
		if err := txn.Set(kv[0], kv[1]); err != nil {
			return Entry{}, true, fmt.Errorf("write entry %d: %w", index, err)
		}
	}
	h.index, h.hash = index, hash
	return e, true, nil
}

// checkLease refuses a receipt that contradicts the stored receipts of its
// lease. Receipts can arrive out of order or with gaps (a node that was down
// misses some), so only the neighbours that are present are checked.
func checkLease(txn *badger.Txn, p *prepared) error {
	r := &p.r
	if r.Seq > 0 {
		before, found, err := getLeaseState(txn, leaseKey(r.Lease, r.Seq-1))
		if err != nil {
			return err
		}
		if found {
			if err := follows(&before, &p.state); err != nil {
				return fmt.Errorf("%w: against seq %d: %w", ErrConflict, r.Seq-1, err)
			}
		}
	}
	if r.Seq < math.MaxUint64 {
		after, found, err := getLeaseState(txn, leaseKey(r.Lease, r.Seq+1))
		if err != nil {
			return err
		}
		if found {
			if err := follows(&p.state, &after); err != nil {
				return fmt.Errorf("%w: against seq %d: %w", ErrConflict, r.Seq+1, err)
			}
		}
	}
	finalSeq, found, err := getUint64(txn, finalKey(r.Lease))
	if err != nil {
		return err
	}
	if found && (r.Final || r.Seq > finalSeq) {
		return fmt.Errorf("%w: the lease already ended with final receipt seq %d", ErrConflict, finalSeq)
	}
	if r.Final {
		last, found, err := lastSeq(txn, r.Lease)
		if err != nil {
			return err
		}
		if found && last > r.Seq {
			return fmt.Errorf("%w: a final receipt at seq %d, but seq %d is stored", ErrConflict, r.Seq, last)
		}
	}
	return nil
}

// follows checks that b can be the receipt after a in one lease.
func follows(a, b *leaseState) error {
	switch {
	case a.final:
		return errors.New("a receipt follows the final one")
	case b.prev != a.digest:
		return errors.New("prev does not match the preceding receipt")
	case b.fixed != a.fixed:
		return errors.New("job, parties, GPUs or held_from differ")
	case b.heldUntil < a.heldUntil:
		return errors.New("held_until goes backwards")
	}
	return nil
}

func getLeaseState(txn *badger.Txn, key []byte) (leaseState, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return leaseState{}, false, nil
	}
	if err != nil {
		return leaseState{}, false, fmt.Errorf("read lease record: %w", err)
	}
	var s leaseState
	err = item.Value(func(v []byte) error {
		s, err = decodeLeaseState(v)
		return err
	})
	if err != nil {
		return leaseState{}, false, fmt.Errorf("read lease record: %w", err)
	}
	return s, true, nil
}

func getUint64(txn *badger.Txn, key []byte) (uint64, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %q: %w", key, err)
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: record %q is not 8 bytes", ErrCorrupt, key)
		}
		n = decodeUint64(v)
		return nil
	})
	return n, true, err
}

// lastSeq finds the highest seq stored for a lease.
func lastSeq(txn *badger.Txn, lease string) (uint64, bool, error) {
	prefix := leasePrefix(lease)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	it.Seek(append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
	if !it.ValidForPrefix(prefix) {
		return 0, false, nil
	}
	seq, ok := indexFromKey(it.Item().Key())
	if !ok {
		return 0, false, fmt.Errorf("%w: short lease key", ErrCorrupt)
	}
	return seq, true, nil
}

func loadEntry(txn *badger.Txn, index uint64) (Entry, error) {
	item, err := txn.Get(entryKey(index))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Entry{}, fmt.Errorf("%w: entry %d is missing", ErrCorrupt, index)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read entry %d: %w", index, err)
	}
	var e Entry
	err = item.Value(func(v []byte) error {
		e, err = decodeEntry(v, false, nil)
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
	}
	if e.Index != index {
		return Entry{}, fmt.Errorf("%w: entry stored at %d says it is %d", ErrCorrupt, index, e.Index)
	}
	return e, nil
}
