package ledger

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Problems Verify names, as `e31 receipts --verify` prints them.
const (
	ProblemSignature    = "signature does not verify"
	ProblemHash         = "entry hash mismatch (edited)"
	ProblemUnreadable   = "entry unreadable (edited)"
	ProblemNotCanonical = "entry bytes altered (edited)"
	ProblemIndex        = "entry index does not match its key (edited)"
	ProblemPrev         = "prev link mismatch (chain broken)"
	ProblemHead         = "head does not match the last entry (edited)"
	// ProblemOutsideLease: the entry claims held time its lease's
	// evidence does not allow (CheckHeld), or the evidence kept for its
	// lease is not the lease's.
	ProblemOutsideLease = "held time outside what the lease allows"
	// ProblemMissing is a format: the index of the missing entry.
	ProblemMissing = "entry %d missing (chain broken)"
)

// VerifyReport is the outcome of Ledger.Verify.
type VerifyReport struct {
	Entries int `json:"entries"` // entries read
	// OneSided counts one-sided records whose lease no two-sided final
	// receipt has settled: held time resting on one party's word.
	OneSided int `json:"one_sided"`
	// Disputed counts leases with a recorded dispute and no two-sided
	// final receipt since.
	Disputed int `json:"disputed"`
	// Unbounded counts leases whose held time no evidence bounds: signed
	// before the rule (ledger.BoundRule), or kept without their terms.
	Unbounded int       `json:"unbounded"`
	OK        bool      `json:"ok"`
	FirstBad  *BadEntry `json:"first_bad,omitempty"`
}

// BadEntry is the first entry at which the chain fails. Lease and Seq are
// empty when the entry is missing or unreadable.
type BadEntry struct {
	Index   uint64 `json:"index"`
	Lease   string `json:"lease,omitempty"`
	Seq     uint64 `json:"seq"`
	Problem string `json:"problem"`
}

// Verify walks the whole chain and checks, for every entry: that it is the
// next index (no gap), that its stored bytes are canonical, that its prev
// is the hash of the entry before, that its own hash is right, and that
// both signatures of its receipt verify against the two peer IDs. It ends by
// checking that the head record names the last entry, which catches entries
// removed from the end. One-sided records are checked by their one
// signature and their lease evidence, disputes by both versions' signatures.
// A broken ledger is reported in VerifyReport, not as
// an error; the error is for failing to read the store at all.
//
// Hashes are checked before signatures, so an edited receipt shows as an
// edit; a signature failure means an entry whose chain fields were rebuilt
// around a receipt that neither party signed. Signature checks, the bulk of
// the cost, run in batches (batch.go) on all available CPUs, and a batch
// that fails is checked again one signature at a time to name the entry.
func (l *Ledger) Verify(ctx context.Context) (VerifyReport, error) {
	return l.verify(ctx, runtime.GOMAXPROCS(0))
}

// verify checks signatures on the given number of goroutines (1: inline).
func (l *Ledger) verify(ctx context.Context, workers int) (VerifyReport, error) {
	var rep VerifyReport
	err := l.view(ctx, func(txn *badger.Txn) error {
		var err error
		rep, err = verifyChain(ctx, txn, workers)
		return err
	})
	if err != nil {
		return VerifyReport{}, fmt.Errorf("verify ledger: %w", err)
	}
	return rep, nil
}

func verifyChain(ctx context.Context, txn *badger.Txn, workers int) (VerifyReport, error) {
	sigs := newSigChecker(ctx, workers)
	rep, err := walkChain(ctx, txn, sigs)
	failed := sigs.wait()
	if err != nil {
		return VerifyReport{}, err
	}
	if failed != nil && (rep.FirstBad == nil || failed.job.pos < rep.FirstBad.Index) {
		r := &failed.job.r
		rep.FirstBad = &BadEntry{Index: failed.job.pos, Lease: r.Lease, Seq: r.Seq, Problem: ProblemSignature}
	}
	rep.OK = rep.FirstBad == nil
	return rep, nil
}

// walkChain checks everything but signatures, which it hands to sigs, and
// stops at the first chain failure: past a break, the entries no longer
// have a trustworthy place in the chain.
func walkChain(ctx context.Context, txn *badger.Txn, sigs *sigChecker) (VerifyReport, error) {
	var (
		rep  VerifyReport
		prev [32]byte // hash of the previous entry
		next = uint64(1)
		keys = map[peer.ID]*pubKey{}
		pc   = newPeerText()
		// Leases not (yet) settled by a two-sided final receipt: a
		// one-sided record or a dispute always comes before that receipt,
		// since the store refuses either after it.
		oneSided = map[string]int{}
		disputed = map[string]bool{}
		bounds   = leaseBounds{txn: txn, terms: map[string]*LeaseTerms{}}
	)
	bad := func(index uint64, r *Receipt, problem string) (VerifyReport, error) {
		b := &BadEntry{Index: index, Problem: problem}
		if r != nil {
			b.Lease, b.Seq = r.Lease, r.Seq
		}
		rep.FirstBad = b
		return rep, nil
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixEntry), PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if rep.Entries%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
		rep.Entries++
		item := it.Item()
		k := item.Key()
		index, ok := indexFromKey(k)
		if !ok || len(k) != len(prefixEntry)+8 {
			return bad(next, nil, fmt.Sprintf(ProblemMissing, next))
		}
		if index != next {
			return bad(next, nil, fmt.Sprintf(ProblemMissing, next))
		}
		var (
			e      Entry
			decErr error
		)
		if err := item.Value(func(v []byte) error {
			e, decErr = decodeEntry(v, true, pc)
			return nil
		}); err != nil {
			return rep, fmt.Errorf("read entry %d: %w", index, err)
		}
		switch {
		case errors.Is(decErr, errNotCanonical):
			return bad(index, &e.Receipt, ProblemNotCanonical)
		case decErr != nil:
			return bad(index, nil, ProblemUnreadable)
		}
		r := e.subject()
		if e.Index != index {
			return bad(index, r, ProblemIndex)
		}
		wantPrev := ""
		if index > 1 {
			wantPrev = hashHex(prev)
		}
		if e.Prev != wantPrev {
			return bad(index, r, ProblemPrev)
		}
		var content []byte
		job := sigJob{pos: index, r: *r}
		if e.Dispute != nil {
			content = e.Dispute.content()
			job.dispute = e.Dispute
			disputed[r.Lease] = true
		} else {
			job.msg = r.SigningBytes()
			content = receiptContent(job.msg, r.ProviderSig, r.SubmitterSig)
			var perr, serr error
			job.provider, perr = cachedKey(keys, r.Provider)
			job.submitter, serr = cachedKey(keys, r.Submitter)
			if perr != nil || serr != nil {
				return bad(index, r, ProblemSignature)
			}
			switch {
			case r.OneSided():
				oneSided[r.Lease]++
			case r.Final:
				delete(oneSided, r.Lease)
				delete(disputed, r.Lease)
			}
			if err := bounds.check(r); err != nil {
				return bad(index, r, ProblemOutsideLease)
			}
		}
		h := entryHash(prev, index, content)
		if hashHex(h) != e.Hash {
			return bad(index, r, ProblemHash)
		}
		sigs.check(job)
		prev = h
		next++
	}
	for _, n := range oneSided {
		rep.OneSided += n
	}
	rep.Disputed = len(disputed)
	rep.Unbounded = bounds.unbounded
	hd, err := readHead(txn)
	if err != nil {
		return rep, err
	}
	last := next - 1
	switch {
	case hd.index > last:
		return bad(next, nil, fmt.Sprintf(ProblemMissing, next))
	case hd.index < last || hd.hash != prev:
		return bad(last, nil, ProblemHead)
	}
	return rep, nil
}

// cachedKey extracts a peer's public key once per walk: a ledger names few
// peers, and unmarshalling the key each time would cost as much as a hash.
func cachedKey(keys map[peer.ID]*pubKey, id peer.ID) (*pubKey, error) {
	if pk, ok := keys[id]; ok {
		return pk, nil
	}
	pk, err := expandedKey(id)
	if err != nil {
		return nil, err
	}
	keys[id] = pk
	return pk, nil
}

// sigJob is one entry's signatures to check.
type sigJob struct {
	pos                 uint64  // where the entry stands: its index, or its place in a file
	r                   Receipt // a dispute's Ours
	msg                 []byte
	provider, submitter *pubKey
	dispute             *Dispute // set on a dispute entry, checked whole
}

// sigFailure is a job whose signatures do not verify, and why.
type sigFailure struct {
	job sigJob
	err error
}

// sigChunk is how many entries are checked in one batch: 256 signatures,
// past the size from which a batch costs about a quarter of checking each,
// and small enough that a few chunks keep every worker busy.
const sigChunk = 128

// sigChecker verifies entries' signatures in chunks, each a batch (see
// batch.go), inline with one CPU or on a pool of workers with more, and
// remembers the failure with the lowest position.
type sigChecker struct {
	ctx   context.Context
	jobs  chan []sigJob // nil when checking inline
	chunk []sigJob      // filling; touched by the caller's goroutine only
	wg    sync.WaitGroup

	mu  sync.Mutex
	bad *sigFailure // guarded by mu
}

func newSigChecker(ctx context.Context, workers int) *sigChecker {
	c := &sigChecker{ctx: ctx, chunk: make([]sigJob, 0, sigChunk)}
	if workers <= 1 {
		return c
	}
	c.jobs = make(chan []sigJob, 2*workers)
	c.wg.Add(workers)
	for range workers {
		go func() {
			defer c.wg.Done()
			for ch := range c.jobs {
				if ctx.Err() == nil {
					c.runChunk(ch)
				}
			}
		}()
	}
	return c
}

// check queues j; it is checked once its chunk is full, or at wait.
func (c *sigChecker) check(j sigJob) {
	c.chunk = append(c.chunk, j)
	if len(c.chunk) == sigChunk {
		c.flush()
	}
}

func (c *sigChecker) flush() {
	if len(c.chunk) == 0 {
		return
	}
	ch := c.chunk
	c.chunk = make([]sigJob, 0, sigChunk)
	if c.jobs == nil {
		c.runChunk(ch)
		return
	}
	c.jobs <- ch
}

// runChunk batches the two-sided receipts of a chunk. One-sided records
// and disputes, rare and checked against lease evidence too, go one by one,
// as does every receipt of a batch that fails, to find which failed.
func (c *sigChecker) runChunk(ch []sigJob) {
	items := make([]sigItem, 0, 2*len(ch))
	for i := range ch {
		j := &ch[i]
		if j.dispute != nil || j.r.OneSided() {
			c.run(j)
			continue
		}
		items = append(items,
			sigItem{key: j.provider, msg: j.msg, sig: j.r.ProviderSig},
			sigItem{key: j.submitter, msg: j.msg, sig: j.r.SubmitterSig})
	}
	if len(items) == 0 || verifySigs(items) {
		return
	}
	for i := range ch {
		if j := &ch[i]; j.dispute == nil && !j.r.OneSided() {
			c.run(j)
		}
	}
}

// run checks one job's signatures alone, under crypto/ed25519's rules.
func (c *sigChecker) run(j *sigJob) {
	var err error
	if j.dispute != nil {
		err = j.dispute.Verify()
	} else {
		err = j.r.verifyWith(j.msg, j.provider, j.submitter)
	}
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bad == nil || j.pos < c.bad.job.pos {
		c.bad = &sigFailure{job: *j, err: err}
	}
}

// wait checks what is still queued, stops the workers and returns the
// failure with the lowest position, if any.
func (c *sigChecker) wait() *sigFailure {
	if c.ctx.Err() == nil {
		c.flush()
	}
	if c.jobs != nil {
		close(c.jobs)
		c.wg.Wait()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bad
}

// leaseBounds checks each entry of a walk against its lease's terms: a
// one-sided record's own evidence, or the evidence kept for a receipt's
// lease (leases.go), each read and verified once per lease.
type leaseBounds struct {
	txn       *badger.Txn
	terms     map[string]*LeaseTerms // nil: the lease has no bounded terms
	unbounded int                    // leases seen without bounded terms
}

// check returns CheckHeld's verdict on r, or an error for evidence kept
// for r's lease that does not verify.
func (b *leaseBounds) check(r *Receipt) error {
	t, seen := b.terms[r.Lease]
	if !seen || (t == nil && r.Evidence != nil) {
		var err error
		if t, err = b.read(r); err != nil {
			return err
		}
		if !seen && t == nil {
			b.unbounded++
		}
		if seen && t != nil {
			b.unbounded--
		}
		b.terms[r.Lease] = t
	}
	if t == nil {
		return nil
	}
	return CheckHeld(r, *t)
}

// read finds r's lease terms: those kept for the lease, else the
// evidence r carries. It returns nil for terms that bound nothing.
func (b *leaseBounds) read(r *Receipt) (*LeaseTerms, error) {
	ev, ok, err := keptLease(b.txn, r.Lease)
	if err != nil {
		return nil, err
	}
	if !ok && r.Evidence == nil {
		return nil, nil
	}
	if !ok {
		ev = *r.Evidence // its signatures are checked with the record's
	}
	t, err := ev.verify()
	if err != nil {
		return nil, err
	}
	if _, _, bounded := t.HeldWindow(); !bounded {
		return nil, nil
	}
	return &t, nil
}
