package ledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// failer is what helpers need from *testing.T, *testing.B and *rapid.T
// alike (rapid's T is not a testing.TB).
type failer interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// party is a peer identity for tests, derived from a seed so that runs and
// golden values are reproducible.
type party struct {
	sk crypto.PrivKey
	id peer.ID
}

func newParty(tb testing.TB, seed byte) party {
	tb.Helper()
	sk, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		tb.Fatal(err)
	}
	return party{sk: sk, id: id}
}

// withForeignHalf returns p's private key with other's public half in
// place of its own: an edited key file, which would sign for a peer ID its
// seed cannot sign for.
func (p party) withForeignHalf(tb testing.TB, other party) crypto.PrivKey {
	tb.Helper()
	raw, err := p.sk.Raw()
	if err != nil {
		tb.Fatal(err)
	}
	pub, err := other.sk.GetPublic().Raw()
	if err != nil {
		tb.Fatal(err)
	}
	copy(raw[32:], pub)
	bad, err := crypto.UnmarshalEd25519PrivateKey(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return bad
}

// signing returns the party's key as a node signs with it: a SigningKey.
func (p party) signing(tb testing.TB) *SigningKey {
	tb.Helper()
	k, err := NewSigningKey(p.sk)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

var t0 = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// interim returns an unsigned interim receipt for seq of a lease that
// started at t0, one minute per seq.
func interim(lease, job string, prov, sub party, seq uint64, prev string) Receipt {
	return Receipt{
		Lease:     lease,
		Job:       job,
		Provider:  prov.id,
		Submitter: sub.id,
		GPUs:      2,
		Seq:       seq,
		HeldFrom:  t0,
		HeldUntil: t0.Add(time.Duration(seq+1) * time.Minute),
		Phase:     PhaseRun,
		Prev:      prev,
	}
}

// final turns r into the final receipt of its lease.
func final(r Receipt) Receipt {
	code := 0
	held := r.Held().Seconds()
	r.Final = true
	r.Phase = PhaseOutput
	r.Outcome = OutcomeCompleted
	r.Attribution = AttributionJob
	r.ExitCode = &code
	r.Reason = "exited 0"
	r.Phases = Phases{Staging: held / 4, Run: held / 2, Output: held / 4}
	r.Output = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
	r.Checkpoint = "bafybeihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	r.OutputWait = held / 8
	return r
}

func sign(tb failer, r Receipt, prov, sub party) Receipt {
	if err := r.SignProvider(prov.sk); err != nil {
		tb.Fatal(err)
	}
	if err := r.Countersign(sub.sk); err != nil {
		tb.Fatal(err)
	}
	return r
}

// leaseChain returns n signed receipts of one lease, properly linked; the
// last is final when withFinal is set.
func leaseChain(tb testing.TB, lease, job string, prov, sub party, n int, withFinal bool) []Receipt {
	tb.Helper()
	out := make([]Receipt, 0, n)
	prev := ""
	for i := range n {
		r := interim(lease, job, prov, sub, uint64(i), prev)
		if withFinal && i == n-1 {
			r = final(r)
		}
		r = sign(tb, r, prov, sub)
		prev = r.Digest()
		out = append(out, r)
	}
	return out
}

func openMem(tb testing.TB, o Options) *Ledger {
	tb.Helper()
	o.InMemory = true
	l, err := Open(context.Background(), "", o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(tb testing.TB, l *Ledger, rs ...Receipt) []Entry {
	tb.Helper()
	es := make([]Entry, 0, len(rs))
	for _, r := range rs {
		e, err := l.Append(context.Background(), r)
		if err != nil {
			tb.Fatalf("append %s/%d: %v", r.Lease, r.Seq, err)
		}
		es = append(es, e)
	}
	return es
}

// mustVerify verifies with signatures checked inline and on a pool of
// workers, and insists both give the same report.
func mustVerify(tb testing.TB, l *Ledger) VerifyReport {
	tb.Helper()
	rep, err := l.verify(context.Background(), 1)
	if err != nil {
		tb.Fatal(err)
	}
	par, err := l.verify(context.Background(), 4)
	if err != nil {
		tb.Fatal(err)
	}
	if !reflect.DeepEqual(rep, par) {
		tb.Fatalf("inline and parallel verification disagree:\n%+v\n%+v", rep, par)
	}
	return rep
}

// rawEntry and setRaw reach under the chain, as someone editing the data
// directory would.
func rawEntry(tb failer, l *Ledger, index uint64) []byte {
	var v []byte
	err := l.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(entryKey(index))
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		tb.Fatalf("read raw entry %d: %v", index, err)
	}
	return v
}

func setRaw(tb failer, l *Ledger, key, val []byte) {
	err := l.db.Update(func(txn *badger.Txn) error {
		if val == nil {
			return txn.Delete(key)
		}
		return txn.Set(key, val)
	})
	if err != nil {
		tb.Fatalf("raw write %q: %v", key, err)
	}
}

// rebuildFrom rewrites the chain fields of entries from index on (and the
// head) so that hashes and links agree again: what an attacker who knows
// the format, but holds no peer's key, can do.
func rebuildFrom(tb testing.TB, l *Ledger, index uint64) {
	tb.Helper()
	es, err := l.All(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var prev [32]byte
	for _, e := range es {
		if e.Index >= index {
			r := e.Receipt
			h := entryHash(prev, e.Index, receiptContent(r.SigningBytes(), r.ProviderSig, r.SubmitterSig))
			p := ""
			if e.Index > 1 {
				p = hashHex(prev)
			}
			rj, err := r.MarshalJSON()
			if err != nil {
				tb.Fatal(err)
			}
			setRaw(tb, l, entryKey(e.Index), encodeEntry(e.Index, fieldReceipt, rj, p, hashHex(h)))
			prev = h
			continue
		}
		if _, err := hex.Decode(prev[:], []byte(e.Hash)); err != nil {
			tb.Fatal(err)
		}
	}
	last := es[len(es)-1].Index
	setRaw(tb, l, []byte(keyHead), chainHead{index: last, hash: prev}.encode())
}
