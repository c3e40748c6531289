package ledger

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBillOwnJobIsHeldNotOwed(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	p := DefaultPolicy()
	r := final(interim("l", "j", prov, sub, 2, "")) // 2 GPUs × 3 min, completed
	b := p.Bill(&r, time.Time{})
	if b.Own || !b.Owed || !near(b.GPUHours, 0.1) || !near(b.OwedGPUHours, 0.1) {
		t.Fatalf("a stranger's completed job: %+v", b)
	}
	own := final(interim("l", "j", prov, prov, 2, ""))
	b = p.Bill(&own, time.Time{})
	if !b.Own || b.Owed || !near(b.GPUHours, 0.1) || b.OwedGPUHours != 0 || b.OwedCPUHours != 0 {
		t.Fatalf("own job on own GPUs: %+v, want held and owed by no one", b)
	}
	lost := final(interim("l", "j", prov, sub, 2, ""))
	lost.Outcome, lost.Attribution = OutcomeProviderLost, AttributionProvider
	if b := p.Bill(&lost, time.Time{}); b.Owed || b.OwedGPUHours != 0 || !near(b.GPUHours, 0.1) {
		t.Fatalf("provider-lost: %+v", b)
	}
}

// TestOneSumEverywhere: the held and owed figures of a set of jobs are
// the same whether Usage, HeldByJobs, SumEntries or an export's
// verification adds them up, the node's own job on its own GPUs included.
func TestOneSumEverywhere(t *testing.T) {
	ctx := context.Background()
	self, prov := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: self.id})
	mustAppend(t, l, leaseChain(t, "a", "job.0", prov, self, 3, true)...) // 2 × 3 min, owed
	lost := leaseChain(t, "b", "job.1", prov, self, 2, false)
	r := final(interim("b", "job.1", prov, self, 2, lost[1].Digest()))
	r.Outcome, r.Attribution = OutcomeProviderLost, AttributionProvider
	lost = append(lost, sign(t, r, prov, self))
	mustAppend(t, l, lost...)                                                  // 2 × 3 min, not owed
	mustAppend(t, l, leaseChain(t, "c", "retry-of-1", self, self, 4, true)...) // own: 2 × 4 min
	mustAppend(t, l, leaseChain(t, "d", "other", prov, self, 5, true)...)      // not of the job

	jobs := map[string]bool{"job.0": true, "job.1": true, "retry-of-1": true}
	keep := func(j string) bool { return jobs[j] }
	want := HeldSum{Leases: 3, GPUHours: 2 * 10.0 / 60, OwedGPUHours: 2 * 3.0 / 60, NotOwedGPUHours: 2 * 7.0 / 60}

	check := func(name string, got HeldSum) {
		t.Helper()
		if got.Leases != want.Leases || !near(got.GPUHours, want.GPUHours) || !near(got.OwedGPUHours, want.OwedGPUHours) ||
			!near(got.NotOwedGPUHours, want.NotOwedGPUHours) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	rep, err := l.Usage(ctx, UsageFilter{Job: keep}, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	check("Usage", rep.Total)
	var byPeer HeldSum
	for _, tot := range rep.ByPeer {
		byPeer.GPUHours += tot.GPUHours
		byPeer.OwedGPUHours += tot.Owed
		byPeer.NotOwedGPUHours += tot.NotOwed
	}
	byPeer.Leases = want.Leases
	check("Usage by peer", byPeer)
	h, err := l.HeldByJobs(ctx, DefaultPolicy(), "job.0", "job.1", "retry-of-1")
	if err != nil {
		t.Fatal(err)
	}
	check("HeldByJobs", h.HeldSum)
	all, err := l.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("SumEntries", SumEntries(all, DefaultPolicy(), keep))

	file := exportOf(t, l, ExportFilter{Jobs: keep})
	vr, err := VerifyExport(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if vr.Entries != 3+3+4 {
		t.Errorf("export of the set holds %d entries, want 10", vr.Entries)
	}
	check("VerifyExport", vr.Held)
}

func TestVerifyExportOfNothing(t *testing.T) {
	l := openMem(t, Options{})
	vr, err := VerifyExport(bytes.NewReader(exportOf(t, l, ExportFilter{Jobs: func(string) bool { return false }})))
	if err != nil || vr.Entries != 0 || vr.Held.Leases != 0 {
		t.Fatalf("empty export: %+v %v", vr, err)
	}
}
