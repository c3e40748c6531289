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
