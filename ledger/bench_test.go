package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Run with: go test -run '^$' -bench . -cpu 2 -count 3 ./ledger/
//
// Besides wall-clock rates, each benchmark reports the CPU time the whole
// process spent per receipt (cpu-us/receipt: every goroutine, Badger's and
// the garbage collector's included). On a machine shared with other work
// the wall-clock rate swings with the load; the CPU per receipt does much
// less, and cores divided by it is the rate the code allows.

// cpuMeter measures the process's CPU time (user and system) over a
// benchmark's timed part.
type cpuMeter struct{ start time.Duration }

func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{start: processCPU(b)}
}

// report adds cpu-us/receipt for n receipts handled since start.
func (m *cpuMeter) report(b *testing.B, n int) {
	used := processCPU(b) - m.start
	b.ReportMetric(float64(used.Microseconds())/float64(n), "cpu-us/receipt")
}

// benchAppenders is how many goroutines append at once: receipts from that
// many leases arriving together. Group commit batches what is waiting while
// the previous commit syncs, so more appenders mean fuller commits.
const benchAppenders = 256

// BenchmarkAppend signs (provider and submitter) and appends receipts from
// many goroutines into an on-disk ledger with synced commits, as a busy node
// would; the concurrency is what group commit batches.
func BenchmarkAppend(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	provKey, subKey := prov.signing(b), sub.signing(b)
	l, err := Open(context.Background(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var next atomic.Uint64
	b.SetParallelism(benchAppenders)
	b.ReportAllocs()
	cpu := startCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := interim(fmt.Sprintf("lease-%d", next.Add(1)), "job-1", prov, sub, 0, "")
			if err := r.SignProvider(provKey); err != nil {
				b.Error(err)
				return
			}
			if err := r.Countersign(subKey); err != nil {
				b.Error(err)
				return
			}
			if _, err := l.Append(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	cpu.report(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
	if c := l.commits.Load(); c > 0 {
		b.ReportMetric(float64(l.appended.Load())/float64(c), "receipts/commit")
	}
}

// BenchmarkAppendSigned is BenchmarkAppend without the signing: what the
// store takes per receipt (verifying both signatures, encoding, the synced
// commit) when the receipts arrive already signed, decoded from the wire.
func BenchmarkAppendSigned(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	l, err := Open(context.Background(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rs := make([]Receipt, b.N)
	for i := range rs {
		rs[i] = fromWire(b, sign(b, interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, ""), prov, sub))
	}
	var next atomic.Int64
	b.SetParallelism(benchAppenders)
	cpu := startCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(context.Background(), rs[next.Add(1)-1]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	cpu.report(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// BenchmarkAppendCountersigned is a submitter's part: receipts arrive
// signed by the provider; it countersigns and stores each. The provider's
// signature is checked once (in Append), its own not at all.
func BenchmarkAppendCountersigned(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	l, err := Open(context.Background(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rs := make([]Receipt, b.N)
	for i := range rs {
		r := interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, "")
		if err := r.SignProvider(prov.sk); err != nil {
			b.Fatal(err)
		}
		rs[i] = fromWire(b, r)
	}
	var next atomic.Int64
	b.SetParallelism(benchAppenders)
	cpu := startCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := rs[next.Add(1)-1]
			if err := r.Countersign(sub.sk); err != nil {
				b.Error(err)
				return
			}
			if _, err := l.Append(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	cpu.report(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// fromWire is r as a peer receives it: encoded and decoded, so carrying
// nothing of what the signing process knew.
func fromWire(b *testing.B, r Receipt) Receipt {
	j, err := r.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	back, err := DecodeReceipt(j)
	if err != nil {
		b.Fatal(err)
	}
	return back
}

// BenchmarkVerify walks an on-disk ledger of verifyEntries receipts:
// reading, decoding, hashing the chain and checking both signatures of each.
// One op is one whole walk.
func BenchmarkVerify(b *testing.B) {
	const verifyEntries = 2000
	prov, sub := newParty(b, 1), newParty(b, 2)
	l, err := Open(context.Background(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < verifyEntries; i += 8 {
				r := sign(b, interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, ""), prov, sub)
				if _, err := l.Append(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportAllocs()
	cpu := startCPU(b)
	for b.Loop() {
		rep, err := l.Verify(context.Background())
		if err != nil || !rep.OK || rep.Entries != verifyEntries {
			b.Fatalf("verify: %+v, %v", rep, err)
		}
	}
	cpu.report(b, b.N*verifyEntries)
	perReceipt := b.Elapsed().Seconds() / float64(b.N*verifyEntries)
	b.ReportMetric(perReceipt*1e9, "ns/receipt")
	b.ReportMetric(1/perReceipt, "receipts/s")
}

// BenchmarkReceiptSign and BenchmarkReceiptVerify measure the Ed25519 work
// alone (two signatures per receipt): the floor under the two benchmarks
// above.
func BenchmarkReceiptSign(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	provKey, subKey := prov.signing(b), sub.signing(b)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	for b.Loop() {
		if err := r.SignProvider(provKey); err != nil {
			b.Fatal(err)
		}
		if err := r.Countersign(subKey); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

func BenchmarkReceiptVerify(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	r := sign(b, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	for b.Loop() {
		if err := r.Verify(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// BenchmarkDecodeEntry is the per-entry decoding and canonical check in
// Verify, apart from hashing and signatures.
func BenchmarkDecodeEntry(b *testing.B) {
	prov, sub := newParty(b, 1), newParty(b, 2)
	l := openMem(b, Options{})
	mustAppend(b, l, leaseChain(b, "lease-1", "job-1", prov, sub, 2, true)...)
	raw := rawEntry(b, l, 2)
	pc := newPeerText()
	for b.Loop() {
		if _, err := decodeEntry(raw, true, pc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSigCheck compares, per signature, crypto/ed25519.Verify with the
// ways this package checks one: alone (as Receipt.Verify), alone with the
// key's tables (as Append), and in a batch of 2*sigChunk (as Verify and
// VerifyExport). One goroutine.
func BenchmarkSigCheck(b *testing.B) {
	p := newParty(b, 1)
	const n = 2 * sigChunk
	msgs, sigs := make([][]byte, n), make([][]byte, n)
	for i := range n {
		r := interim(fmt.Sprintf("lease-%d", i), "job-1", p, p, 0, "")
		msgs[i] = r.SigningBytes()
		var err error
		if sigs[i], err = p.sk.Sign(msgs[i]); err != nil {
			b.Fatal(err)
		}
	}
	plain, err := publicKey(p.id)
	if err != nil {
		b.Fatal(err)
	}
	expanded, err := expandedKey(p.id)
	if err != nil {
		b.Fatal(err)
	}
	perSig := func(b *testing.B, sigsPerOp int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sigsPerOp), "ns/sig")
	}
	b.Run("stdlib", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if ok, _ := plain.pk.Verify(msgs[i%n], sigs[i%n]); !ok {
				b.Fatal("does not verify")
			}
			i++
		}
		perSig(b, 1)
	})
	for name, k := range map[string]*pubKey{"alone": plain, "alone-expanded": expanded} {
		b.Run(name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := checkSig(k, msgs[i%n], sigs[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			perSig(b, 1)
		})
	}
	b.Run("batch", func(b *testing.B) {
		items := make([]sigItem, n)
		for i := range items {
			items[i] = sigItem{key: expanded, msg: msgs[i], sig: sigs[i]}
		}
		for b.Loop() {
			if !verifySigs(items) {
				b.Fatal("does not verify")
			}
		}
		perSig(b, n)
	})
}
