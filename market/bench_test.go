package market

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchView builds a large view: providers × 8 devices, about half of them
// leased with staggered ends, and a queue of jobs of mixed sizes from many
// submitters, some with model or memory constraints.
func benchView(providers, jobs int) View {
	rng := rand.New(rand.NewPCG(1, 2))
	now := scenarioStart
	v := View{Epoch: 42, Now: now}
	for p := range providers {
		id := fmt.Sprintf("12D3KooWbenchprovider%06d", p)
		model, mem := "NVIDIA H100 80GB HBM3", uint64(80*GiB)
		if p%10 == 0 {
			model, mem = "NVIDIA A100-SXM4-40GB", uint64(40*GiB)
		}
		o := Offer{Provider: id, CPUs: 128, MemoryBytes: uint64(1 * TiB)}
		busy := rng.IntN(9) // 0..8 devices leased
		var leased []string
		for g := range 8 {
			uuid := fmt.Sprintf("GPU-%06d-%d", p, g)
			o.GPUs = append(o.GPUs, GPU{Index: g, UUID: uuid, Model: model, MemoryBytes: mem, Free: g >= busy})
			if g < busy {
				leased = append(leased, uuid)
			}
		}
		v.Offers = append(v.Offers, o)
		for len(leased) > 0 {
			n := min(len(leased), 1<<rng.IntN(4))
			limit := Duration(rng.IntN(8)+1) * Hour
			v.Leases = append(v.Leases, Lease{
				ID: fmt.Sprintf("lease-%06d-%d", p, len(leased)), Job: fmt.Sprintf("running-%06d-%d", p, len(leased)),
				Provider: id, Submitter: fmt.Sprintf("sub%04d", rng.IntN(1000)), GPUs: leased[:n],
				CPUs: 8 * n, MemoryBytes: uint64(64*GiB) * uint64(n),
				Start: now - int64(rng.Int64N(int64(limit))), Limit: limit,
			})
			leased = leased[n:]
		}
	}
	sizes := []int{1, 1, 1, 1, 1, 1, 2, 2, 4, 8}
	for j := range jobs {
		r := Request{GPUs: sizes[rng.IntN(len(sizes))], CPUs: 4, Memory: 32 * GiB, Limit: Duration(rng.IntN(24)+1) * Hour}
		switch rng.IntN(10) {
		case 0:
			r.GPUModel = "A100"
		case 1:
			r.GPUModel = "H100"
			r.GPUMemory = 80 * GiB
		case 2:
			r.GPUs, r.CPUs = 0, 16 // CPU only
		}
		v.Jobs = append(v.Jobs, Job{
			ID: fmt.Sprintf("job-%07d", j), Submitter: fmt.Sprintf("sub%04d", rng.IntN(1000)),
			SubmittedAt: now - rng.Int64N(int64(20*Minute)), Request: r,
		})
	}
	for s := range 1000 {
		v.Usage = append(v.Usage, Usage{Submitter: fmt.Sprintf("sub%04d", s), GPUMillis: rng.Int64N(int64(100 * Hour))})
	}
	return v
}

// BenchmarkMatch is one pass over 10,000 providers × 8 devices and 100,000
// queued jobs, with reservations on.
func BenchmarkMatch(b *testing.B) {
	v := benchView(10_000, 100_000)
	var r Result
	b.ResetTimer()
	for b.Loop() {
		r = Match(v, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(v.Jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(len(r.Assignments)), "assigned")
	b.ReportMetric(float64(len(r.Reservations)), "reserved")
}

// addLocality makes a view weigh data: a tenth of the jobs read one of a
// thousand datasets (a few also a second one), and each dataset is held by
// a few providers, listed by some and only in the filter of others, as
// offers that summarize thousands of roots carry them.
func addLocality(rng *rand.Rand, v *View) {
	const datasets = 1000
	root := func(i int) string { return fmt.Sprintf("bafkbenchdataset%04d", i) }
	held := make([][]Datum, len(v.Offers))
	for d := range datasets {
		for range 1 + rng.IntN(4) {
			p := rng.IntN(len(v.Offers))
			held[p] = append(held[p], Datum{Root: root(d), Size: uint64(1+rng.IntN(100)) * uint64(GiB)})
		}
	}
	for p := range v.Offers {
		if len(held[p]) == 0 {
			continue
		}
		h := NewHoldings(held[p])
		if rng.IntN(2) == 0 {
			// Only in the filter, as past the MaxHeldRoots largest.
			var names []string
			for _, d := range held[p] {
				names = append(names, d.Root)
			}
			h = Holdings{Bloom: bloomOf(names...)}
		}
		v.Offers[p].Holdings = h
	}
	for j := range v.Jobs {
		if rng.IntN(10) != 0 {
			continue
		}
		job := &v.Jobs[j]
		job.Data = append(job.Data, Datum{Root: root(rng.IntN(datasets)), Size: uint64(1+rng.IntN(100)) * uint64(GiB)})
		if rng.IntN(4) == 0 {
			job.Data = append(job.Data, Datum{Root: root(rng.IntN(datasets)), Size: uint64(GiB)})
		}
		if rng.IntN(3) == 0 {
			job.Request.LocalityWait = 2 * Minute
		}
	}
}

// BenchmarkMatchLocality is BenchmarkMatch's pass with a tenth of the jobs
// reading data that a few providers hold.
func BenchmarkMatchLocality(b *testing.B) {
	v := benchView(10_000, 100_000)
	addLocality(rand.New(rand.NewPCG(3, 4)), &v)
	var r Result
	b.ResetTimer()
	for b.Loop() {
		r = Match(v, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(v.Jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(len(r.Assignments)), "assigned")
	b.ReportMetric(float64(len(r.Reservations)), "reserved")
}

// addGangs turns about one job in fifty into a gang of 2 to 8 parts with
// its request, a few of them in flight: one part leased, or gone.
func addGangs(rng *rand.Rand, v *View) {
	n := len(v.Jobs)
	for j := range n {
		if rng.IntN(50) != 0 {
			continue
		}
		g := v.Jobs[j]
		id := fmt.Sprintf("gang-%07d", j)
		nodes := 2 + rng.IntN(7)
		g.Request.Nodes = nodes
		flight := -1
		if rng.IntN(10) == 0 {
			flight = rng.IntN(nodes)
		}
		for r := range nodes {
			part := g
			part.ID = TaskID(id, r)
			if r == flight {
				if rng.IntN(2) == 0 {
					continue // gone
				}
				v.Leases = append(v.Leases, Lease{ID: "lease-" + part.ID, Job: part.ID, Provider: v.Offers[rng.IntN(len(v.Offers))].Provider,
					Submitter: part.Submitter, CPUs: part.Request.CPUs, MemoryBytes: uint64(part.Request.Memory), Start: v.Now, Limit: part.Request.Limit})
			}
			v.Jobs = append(v.Jobs, part)
		}
	}
}

// BenchmarkMatchGangs is BenchmarkMatch's pass with about one job in fifty
// made a gang.
func BenchmarkMatchGangs(b *testing.B) {
	v := benchView(10_000, 100_000)
	addGangs(rand.New(rand.NewPCG(5, 6)), &v)
	var r Result
	b.ResetTimer()
	for b.Loop() {
		r = Match(v, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(v.Jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(len(r.Assignments)), "assigned")
	b.ReportMetric(float64(len(r.Reservations)), "reserved")
}

// addPrices prices the view: each provider at one of eight prices from
// 1.00 to 2.75 per GPU-hour, and a third of the jobs capped at one of
// four caps from 1.50 to 3.00, so that classes split by price, a capped
// job skips the offers above its cap and every job weighs price among the
// places that fit it alike.
func addPrices(rng *rand.Rand, v *View) {
	for p := range v.Offers {
		v.Offers[p].Price = PriceUnit + Price(rng.IntN(8))*PriceUnit/4
	}
	for j := range v.Jobs {
		if rng.IntN(3) == 0 {
			v.Jobs[j].Request.MaxPrice = PriceUnit*3/2 + Price(rng.IntN(4))*PriceUnit/2
		}
	}
}

// BenchmarkMatchPrices is BenchmarkMatch's pass on the same view priced
// (addPrices); its figures beside BenchmarkMatch's, from one run, are
// what prices cost Match.
func BenchmarkMatchPrices(b *testing.B) {
	v := benchView(10_000, 100_000)
	addPrices(rand.New(rand.NewPCG(3, 4)), &v)
	var r Result
	b.ResetTimer()
	for b.Loop() {
		r = Match(v, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(v.Jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(len(r.Assignments)), "assigned")
	b.ReportMetric(float64(len(r.Reservations)), "reserved")
}
