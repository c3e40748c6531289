package view

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// BenchmarkPassBetweenEpochs is one pass between epochs (Current, then
// Match) over a queue of trivial jobs from one submitter, on 3 providers of 4
// GPUs, with as many jobs already leased and released as there are queued:
// the deep-queue run of `testnet bench --only rss`. Its cost is what bounds
// how often a provider can take the next job of a deep queue. The history
// cases add an hour's leases of other submitters, released and pruned: a
// busy network's past, which costs a pass nothing (only leases not yet
// slimmed, and those of the submitters in the view, are read).
func BenchmarkPassBetweenEpochs(b *testing.B) {
	for _, c := range []struct{ queued, history int }{{10, 0}, {1000, 0}, {2000, 0}, {10000, 0}, {10, 20000}} {
		queued := c.queued
		name := fmt.Sprintf("queued=%d", queued)
		if c.history > 0 {
			name += fmt.Sprintf(",history=%d", c.history)
		}
		b.Run(name, func(b *testing.B) {
			sub, prov := wiretest.FreshParty(b), wiretest.FreshParty(b)
			now := time.Now()
			v := NewMarket()
			others := make([]wiretest.Party, 100)
			for i := range others {
				others[i] = wiretest.FreshParty(b)
			}
			for i := range c.history {
				other := others[i%len(others)]
				l := wire.SignedLease{Terms: wiretest.Terms(prov.ID, other.ID)}
				l.Terms.ID, l.Terms.Job = fmt.Sprint("past-lease-", i), fmt.Sprint("past-job-", i)
				at := now.Add(-time.Hour + time.Duration(i)*time.Hour/time.Duration(c.history))
				l.Terms.Proposed = at.UnixMilli()
				v.AddLease(l, Local(at))
				v.ReleaseLease(wire.ReleaseBody{Lease: l.Terms.ID, Provider: l.Terms.Provider, Submitter: l.Terms.Submitter, HeldMs: 100, At: at.UnixMilli() + 100}, prov.ID, Local(at.Add(100*time.Millisecond)))
			}
			body := wire.DeclarationBody{Declaration: market.NewDeclaration("bench", []string{"true"}, 1, market.Duration(60_000), nil)}
			for i := range 2 * queued {
				id := fmt.Sprintf("job-%06d", i)
				v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Body: body, Seen: now.Add(-time.Minute), Signed: now.Add(-time.Minute)})
				if i >= queued {
					continue
				}
				l := wire.SignedLease{Terms: wiretest.Terms(prov.ID, sub.ID)}
				l.Terms.ID, l.Terms.Job = "lease-"+id, id
				l.Terms.Proposed = now.Add(-30 * time.Second).UnixMilli()
				v.AddLease(l, Local(now.Add(-30*time.Second)))
				v.ReleaseLease(wire.ReleaseBody{Lease: l.Terms.ID, Provider: l.Terms.Provider, Submitter: l.Terms.Submitter, At: now.Add(-20 * time.Second).UnixMilli()}, prov.ID, Local(now.Add(-20*time.Second)))
			}
			// As a node does every epoch: leases released long ago are
			// slimmed to what use needs.
			v.Prune(now, time.Hour, time.Hour)
			var offers []SignedOffer
			for p := range 3 {
				o := market.Offer{Provider: fmt.Sprintf("p%d", p), CPUs: 64, MemoryBytes: 256 << 30}
				for g := range 4 {
					o.GPUs = append(o.GPUs, market.GPU{Index: g, UUID: fmt.Sprintf("p%d-GPU-%d", p, g), Model: "H100", MemoryBytes: 80 << 30, Free: g == 0})
				}
				offers = append(offers, SignedOffer{Offer: o, SignedAt: now.UnixMilli()})
			}
			epochOf := func(t time.Time) uint64 { return uint64(t.UnixMilli() / 1000) }
			firstEpoch := func(s Stamp) time.Time { return s.Signed.Truncate(time.Second).Add(time.Second) }
			// CPU time, not wall time: on a shared machine the wall time
			// is mostly waiting for a core.
			cpu0 := processCPU(b)
			for b.Loop() {
				mv := v.Current(now, offers, epochOf, firstEpoch)
				if res := market.Match(mv, market.Options{}); len(res.Assignments) != 3 {
					b.Fatalf("%d assignments, want 3", len(res.Assignments))
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
