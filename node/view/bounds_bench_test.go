package view

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// BenchmarkViewMemory is what a view's open jobs cost in memory, the
// figures the view's default bounds are sized from (doc.go, "Bounds"):
// the heap one open job, one array task and one byte of a signed
// declaration take, each decoded as a node decodes what gossip brings.
// The declaration shapes are those that cost the most heap per byte
// carried: many tiny command arguments, many tiny env entries, many tiny
// array values; "flat" is one long string, the least.
//
//	go test ./node/view -run '^$' -bench ViewMemory -benchtime 1x
func BenchmarkViewMemory(b *testing.B) {
	subs := make([]wiretest.Party, 20)
	for i := range subs {
		subs[i] = wiretest.FreshParty(b)
	}
	now := time.Now()
	trivial := market.NewDeclaration("sybil", []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
	b.Run("single", func(b *testing.B) {
		const n = 20_000
		raws := make([][]byte, n)
		for i := range raws {
			d := trivial
			d.Name = fmt.Sprint("sybil-", i)
			raws[i] = sealed(b, subs[i%len(subs)], d)
		}
		for b.Loop() {
			per, _ := heapOf(b, func(v *Market) {
				for _, raw := range raws {
					addDecoded(b, v, raw, now)
				}
			})
			b.ReportMetric(per/n, "B/job")
		}
	})
	b.Run("task", func(b *testing.B) {
		const arrays, tasks = 20, 10_000
		raws := make([][]byte, arrays)
		for i := range raws {
			d := trivial
			d.Name = fmt.Sprint("array-", i)
			d.Array = &market.Array{Count: tasks}
			raws[i] = sealed(b, subs[i%len(subs)], d)
		}
		for b.Loop() {
			per, _ := heapOf(b, func(v *Market) {
				for _, raw := range raws {
					addDecoded(b, v, raw, now)
				}
			})
			b.ReportMetric(per/(arrays*tasks), "B/task")
		}
	})
	for _, shape := range []string{"args", "env", "values", "flat"} {
		b.Run("bytes="+shape, func(b *testing.B) {
			// An array's values are tasks each: fewer of those, within
			// what one submitter may hold.
			n := 500
			if shape == "values" {
				n = len(subs)
			}
			full := fullDeclaration(b, subs[0], shape)
			raws := make([][]byte, n)
			total := 0
			for i := range raws {
				d := full
				d.Name = fmt.Sprintf("big-%06d", i)
				raws[i] = sealed(b, subs[i%len(subs)], d)
				total += len(raws[i])
			}
			for b.Loop() {
				per, _ := heapOf(b, func(v *Market) {
					for _, raw := range raws {
						addDecoded(b, v, raw, now)
					}
				})
				b.ReportMetric(per/float64(total), "B/decl-byte")
				b.ReportMetric(float64(total)/float64(n), "decl-bytes")
			}
		})
	}
}

// sealed signs d as sub would broadcast it.
func sealed(tb testing.TB, sub wiretest.Party, d market.Declaration) []byte {
	tb.Helper()
	s, err := p2p.Seal(sub.SK, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return s.Raw
}

// addDecoded opens, checks and decodes raw as a node's gossip does, and
// adds it to v.
func addDecoded(tb testing.TB, v *Market, raw []byte, now time.Time) {
	tb.Helper()
	s, err := p2p.Open(raw)
	if err != nil {
		tb.Fatal(err)
	}
	var body wire.DeclarationBody
	if err := s.Decode(&body); err != nil {
		tb.Fatal(err)
	}
	if err := body.Check(); err != nil {
		tb.Fatal(err)
	}
	if !v.AddJob(&OpenJob{ID: wire.JobID(s), Submitter: s.Signer, Body: body, Seen: now, Signed: s.Time(), Hash: s.Hash(), Size: len(raw)}) {
		tb.Fatalf("declaration of %d bytes refused", len(raw))
	}
}

// heapOf is the heap that fill leaves in a new view, in bytes.
func heapOf(b *testing.B, fill func(v *Market)) (float64, *Market) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	v := NewBoundedMarket(Bounds{Jobs: -1, DeclarationBytes: -1})
	fill(v)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(v)
	return float64(m1.HeapAlloc) - float64(m0.HeapAlloc), v
}

// fullDeclaration is a declaration that fills a gossip message with
// shape: the most heap per byte a stranger can make a view hold.
func fullDeclaration(tb testing.TB, sub wiretest.Party, shape string) market.Declaration {
	tb.Helper()
	build := func(k int) market.Declaration {
		d := market.NewDeclaration("big-000000", []string{"true"}, 1, market.Duration(time.Minute.Milliseconds()), nil)
		switch shape {
		case "args":
			for range k {
				d.Work.Command = append(d.Work.Command, "a")
			}
		case "env":
			d.Work.Env = make(map[string]string, k)
			for j := range k {
				d.Work.Env[fmt.Sprintf("K%x", j)] = ""
			}
		case "values":
			d.Array = &market.Array{Values: make([]string, max(k, 1))}
		case "flat":
			d.Work.Env = map[string]string{"PAD": strings.Repeat("x", k)}
		}
		return d
	}
	// The most elements that still fit, a little short of the limit: a
	// signature's nonce and time vary in length.
	fits := func(k int) bool {
		d := build(k)
		if d.Validate() != nil {
			return false
		}
		s, err := p2p.Seal(sub.SK, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, time.Now())
		return err == nil && len(s.Raw) <= p2p.MaxPayload-64
	}
	lo, hi := 0, p2p.MaxPayload
	for lo < hi {
		if mid := (lo + hi + 1) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return build(lo)
}

// BenchmarkPassOverFlood is one pass between epochs (Current, then Match)
// over a view that 20 identities flooded, each declaring its own bound of
// jobs (10 arrays of 10,000 tasks, then 10,000 single jobs), with one honest
// job among them: on the default Bounds, which hold what the flood could
// fit, and unbounded, which holds all of it. 3 providers of 4 GPUs.
//
//	go test ./node/view -run '^$' -bench PassOverFlood -benchtime 3x
func BenchmarkPassOverFlood(b *testing.B) {
	subs := make([]wiretest.Party, 21)
	for i := range subs {
		subs[i] = wiretest.FreshParty(b)
	}
	for _, c := range []struct {
		name   string
		bounds Bounds
	}{{"bounded", Bounds{}}, {"unbounded", Bounds{Jobs: -1, DeclarationBytes: -1}}} {
		b.Run(c.name, func(b *testing.B) {
			now := time.Now()
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			v := NewBoundedMarket(c.bounds)
			honest := subs[20]
			body := wire.DeclarationBody{Declaration: market.NewDeclaration("honest", []string{"true"}, 1, market.Duration(60_000), nil)}
			v.AddJob(&OpenJob{ID: "honest", Submitter: honest.ID, Body: body, Seen: now.Add(-time.Hour), Signed: now.Add(-time.Hour), Size: 400})
			for k, s := range subs[:20] {
				arr := wire.DeclarationBody{Declaration: market.NewDeclaration("sybil", []string{"true"}, 1, market.Duration(60_000), nil)}
				arr.Declaration.Array = &market.Array{Count: market.MaxArrayTasks / 10}
				for a := range 10 {
					v.AddJob(&OpenJob{ID: fmt.Sprintf("array-%02d-%d", k, a), Submitter: s.ID, Body: arr, Seen: now, Signed: now, Size: 400})
				}
				for i := range maxOpenJobsPerSubmitter {
					v.AddJob(&OpenJob{ID: fmt.Sprintf("sybil-%02d-%05d", k, i), Submitter: s.ID, Body: body, Seen: now, Signed: now, Size: 400})
				}
			}
			if _, ok := v.Job("honest"); !ok {
				b.Fatal("the honest job was evicted")
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			var offers []SignedOffer
			for p := range 3 {
				o := market.Offer{Provider: fmt.Sprintf("p%d", p), CPUs: 64, MemoryBytes: 256 << 30}
				for g := range 4 {
					o.GPUs = append(o.GPUs, market.GPU{Index: g, UUID: fmt.Sprintf("p%d-GPU-%d", p, g), Model: "H100", MemoryBytes: 80 << 30, Free: true})
				}
				offers = append(offers, SignedOffer{Offer: o, SignedAt: now.UnixMilli()})
			}
			epochOf := func(t time.Time) uint64 { return uint64(t.UnixMilli() / 1000) }
			firstEpoch := func(s Stamp) time.Time { return s.Signed.Truncate(time.Second).Add(time.Second) }
			cpu0 := processCPU(b)
			for b.Loop() {
				mv := v.Current(now, offers, epochOf, firstEpoch)
				if res := market.Match(mv, market.Options{}); len(res.Assignments) == 0 {
					b.Fatal("no assignments")
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(v.OpenCount()), "open-jobs")
			b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "view-MiB")
		})
	}
}
