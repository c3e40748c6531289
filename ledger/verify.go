package ledger

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
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
	Disputed int       `json:"disputed"`
	OK       bool      `json:"ok"`
	FirstBad *BadEntry `json:"first_bad,omitempty"`
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
// the cost, run on all available CPUs.
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
	sigBad := sigs.wait()
	if err != nil {
		return VerifyReport{}, err
	}
	if sigBad != nil && (rep.FirstBad == nil || sigBad.Index < rep.FirstBad.Index) {
		rep.FirstBad = sigBad
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
		keys = map[peer.ID]crypto.PubKey{}
		pc   = newPeerText()
		// Leases not (yet) settled by a two-sided final receipt: a
		// one-sided record or a dispute always comes before that receipt,
		// since the store refuses either after it.
		oneSided = map[string]int{}
		disputed = map[string]bool{}
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
		job := sigJob{index: index, r: *r}
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
func cachedKey(keys map[peer.ID]crypto.PubKey, id peer.ID) (crypto.PubKey, error) {
	if pk, ok := keys[id]; ok {
		return pk, nil
	}
	pk, err := publicKey(id)
	if err != nil {
		return nil, err
	}
	keys[id] = pk
	return pk, nil
}

type sigJob struct {
	index               uint64
	r                   Receipt // a dispute's Ours
	msg                 []byte
	provider, submitter crypto.PubKey
	dispute             *Dispute // set on a dispute entry, checked whole
}

// sigChecker verifies receipt signatures, inline with one CPU or on a pool
// of workers with more, and remembers the lowest failing index.
type sigChecker struct {
	ctx  context.Context
	jobs chan sigJob // nil when checking inline
	wg   sync.WaitGroup

	mu  sync.Mutex
	bad *BadEntry // guarded by mu
}

func newSigChecker(ctx context.Context, workers int) *sigChecker {
	c := &sigChecker{ctx: ctx}
	if workers <= 1 {
		return c
	}
	c.jobs = make(chan sigJob, 4*workers)
	c.wg.Add(workers)
	for range workers {
		go func() {
			defer c.wg.Done()
			for j := range c.jobs {
				if ctx.Err() == nil {
					c.run(&j)
				}
			}
		}()
	}
	return c
}

func (c *sigChecker) check(j sigJob) {
	if c.jobs == nil {
		c.run(&j)
		return
	}
	c.jobs <- j
}

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
	if c.bad == nil || j.index < c.bad.Index {
		c.bad = &BadEntry{Index: j.index, Lease: j.r.Lease, Seq: j.r.Seq, Problem: ProblemSignature}
	}
}

// wait stops the workers and returns the first signature failure.
func (c *sigChecker) wait() *BadEntry {
	if c.jobs != nil {
		close(c.jobs)
		c.wg.Wait()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bad
}
