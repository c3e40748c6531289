package ledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// sevenEntries stores three leases: entries 1-3 (lease-a), 4-5 (lease-b),
// 6-7 (lease-c).
func sevenEntries(t *testing.T, l *Ledger) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	mustAppend(t, l, leaseChain(t, "lease-a", "job-1", prov, sub, 3, true)...)
	mustAppend(t, l, leaseChain(t, "lease-b", "job-2", sub, prov, 2, false)...)
	mustAppend(t, l, leaseChain(t, "lease-c", "job-3", prov, sub, 2, true)...)
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != 7 {
		t.Fatalf("untouched ledger: %+v", rep)
	}
}

func wantBad(t *testing.T, l *Ledger, index uint64, problem string) {
	t.Helper()
	rep := mustVerify(t, l)
	if rep.OK || rep.FirstBad == nil {
		t.Fatalf("tampering not detected: %+v", rep)
	}
	if rep.FirstBad.Index != index || rep.FirstBad.Problem != problem {
		t.Fatalf("first bad entry %+v, want index %d %q", *rep.FirstBad, index, problem)
	}
}

func TestVerifyDetectsForgedSignature(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	// Rewrite entries 6 and 4 to claim 8 GPUs, sign them with a key that is
	// not the submitter's, and rebuild every hash from 4 on so that the chain
	// itself is consistent: only the signatures can tell, and the first
	// forgery must be named even when signatures are checked in parallel.
	for _, index := range []uint64{6, 4} {
		e, err := loadEntryRaw(l, index)
		if err != nil {
			t.Fatal(err)
		}
		r := e.Receipt
		r.GPUs = 8
		r.SubmitterSig, _ = newParty(t, 9).sk.Sign(r.SigningBytes())
		rj, _ := r.MarshalJSON()
		setRaw(t, l, entryKey(index), encodeEntry(index, fieldReceipt, rj, e.Prev, e.Hash))
	}
	rebuildFrom(t, l, 4)
	rep := mustVerify(t, l)
	if rep.OK || *rep.FirstBad != (BadEntry{Index: 4, Lease: "lease-b", Seq: 0, Problem: ProblemSignature}) {
		t.Fatalf("forged signature: %+v", rep.FirstBad)
	}
}

func TestVerifyDetectsEditedField(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	raw := rawEntry(t, l, 3)
	edited := bytes.Replace(raw, []byte(`"gpus":2`), []byte(`"gpus":1`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("test did not edit anything")
	}
	setRaw(t, l, entryKey(3), edited)
	wantBad(t, l, 3, ProblemHash)
}

func TestVerifyDetectsDeletedEntry(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	setRaw(t, l, entryKey(5), nil)
	wantBad(t, l, 5, "entry 5 missing (chain broken)")
}

func TestVerifyDetectsDeletedLastEntry(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	setRaw(t, l, entryKey(7), nil)
	wantBad(t, l, 7, "entry 7 missing (chain broken)")
}

// TestVerifyDetectsRenumbering: removing entry 3 and moving the later ones
// down closes the gap, but entry 3's prev no longer links.
func TestVerifyDetectsRenumbering(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	for i := uint64(3); i < 7; i++ {
		e, err := loadEntryRaw(l, i+1)
		if err != nil {
			t.Fatal(err)
		}
		rj, _ := e.Receipt.MarshalJSON()
		setRaw(t, l, entryKey(i), encodeEntry(i, fieldReceipt, rj, e.Prev, e.Hash))
	}
	setRaw(t, l, entryKey(7), nil)
	wantBad(t, l, 3, ProblemPrev)
}

func TestVerifyDetectsSwappedEntries(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	a, b := rawEntry(t, l, 2), rawEntry(t, l, 6)
	setRaw(t, l, entryKey(2), b)
	setRaw(t, l, entryKey(6), a)
	wantBad(t, l, 2, ProblemIndex)
}

func TestVerifyDetectsRewoundHead(t *testing.T) {
	l := openMem(t, Options{})
	sevenEntries(t, l)
	e, err := loadEntryRaw(l, 6)
	if err != nil {
		t.Fatal(err)
	}
	var h chainHead
	h.index = 6
	if _, err := hex.Decode(h.hash[:], []byte(e.Hash)); err != nil {
		t.Fatal(err)
	}
	setRaw(t, l, []byte(keyHead), h.encode())
	wantBad(t, l, 7, ProblemHead)
}

// TestVerifyDetectsEditOnDisk edits the data directory with Badger itself
// while the ledger is closed, as an operator with a text editor would.
func TestVerifyDetectsEditOnDisk(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sevenEntries(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(entryKey(3))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return txn.Set(entryKey(3), bytes.Replace(v, []byte(`"completed"`), []byte(`"failed"`), 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wantBad(t, l, 3, ProblemHash)
}

func loadEntryRaw(l *Ledger, index uint64) (Entry, error) {
	var e Entry
	err := l.db.View(func(txn *badger.Txn) error {
		var err error
		e, err = loadEntry(txn, index)
		return err
	})
	return e, err
}

// TestVerifyBatchesNameFirstForgery: with entries enough for several
// batches, forgeries in different batches (the later one queued first) are
// found, and the earliest is the one named, inline and in parallel.
func TestVerifyBatchesNameFirstForgery(t *testing.T) {
	l := openMem(t, Options{})
	prov, sub := newParty(t, 1), newParty(t, 2)
	const n = 3*sigChunk + 5
	var rs []Receipt
	for i := range n {
		rs = append(rs, sign(t, interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, ""), prov, sub))
	}
	mustAppend(t, l, rs...)
	if rep := mustVerify(t, l); !rep.OK || rep.Entries != n {
		t.Fatalf("untouched ledger: %+v", rep)
	}
	first, second := uint64(sigChunk+7), uint64(2*sigChunk+3)
	for _, index := range []uint64{second, first} {
		e, err := loadEntryRaw(l, index)
		if err != nil {
			t.Fatal(err)
		}
		r := e.Receipt
		r.ProviderSig, _ = newParty(t, 9).sk.Sign(r.SigningBytes())
		rj, _ := r.MarshalJSON()
		setRaw(t, l, entryKey(index), encodeEntry(index, fieldReceipt, rj, e.Prev, e.Hash))
	}
	rebuildFrom(t, l, first)
	want := BadEntry{Index: first, Lease: fmt.Sprintf("lease-%d", first-1), Problem: ProblemSignature}
	if rep := mustVerify(t, l); rep.OK || *rep.FirstBad != want {
		t.Fatalf("first bad %+v, want %+v", rep.FirstBad, want)
	}
}
