package view

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"
)

// scanLeases is what snapshot reads of the leases, by a walk over every
// lease the view holds: the live leases, each submitter's use, and the
// newest signing time among them. It is the reference that the indexes
// (recent, bySubmitter, slimmedNewest) must agree with.
func scanLeases(v *Market, cutoff, arrivedBy time.Time, offers []SignedOffer, submitters []string, now int64) ([]market.Lease, map[string]int64, time.Time) {
	at := func(s Stamp) bool { return s.In(cutoff, arrivedBy) }
	byProvider := make(map[string]SignedOffer)
	for _, o := range offers {
		byProvider[o.Provider] = o
	}
	var newest time.Time
	later := func(t time.Time) {
		if t.After(newest) {
			newest = t
		}
	}
	var live []market.Lease
	usage := map[string]int64{}
	for _, s := range submitters {
		usage[s] = 0
	}
	for _, kl := range v.leases {
		t := &kl.lease.Terms
		if t.ID == "" || !at(kl.seen) {
			continue
		}
		later(signedOf(kl.seen))
		if at(kl.released) {
			later(signedOf(kl.released))
		}
		o, ok := byProvider[t.Provider]
		isLive := !at(kl.released) && !(ok && offerEnds(o.SignedAt, o.GPUs, t))
		if isLive {
			live = append(live, kl.lease.Market())
		}
		if _, ok := usage[t.Submitter]; !ok || now-t.Proposed > usageWindow.Milliseconds() {
			continue
		}
		charge := market.Charge(kl.gpus, t.Limit)
		if !isLive {
			charge = min(charge, int64(kl.gpus)*kl.heldMs)
		}
		usage[t.Submitter] += market.Decay(charge, now-t.Proposed, usageHalfLife.Milliseconds())
	}
	return live, usage, newest
}

// TestPropertyIndexedLeasesMatchAFullWalk: whatever jobs, leases, releases
// (early ones included) and prunes a view has seen, over hours, the view a
// pass reads through the indexes has the live leases, the use and the Now
// that a walk over every lease gives.
func TestPropertyIndexedLeasesMatchAFullWalk(t *testing.T) {
	subs := []wiretest.Party{wiretest.SeededParty(t, 1), wiretest.SeededParty(t, 2), wiretest.SeededParty(t, 3)}
	provs := []wiretest.Party{wiretest.SeededParty(t, 4), wiretest.SeededParty(t, 5)}
	body := wire.DeclarationBody{Declaration: market.NewDeclaration("p", []string{"true"}, 1, market.Duration(60_000), nil)}
	rapid.Check(t, func(rt *rapid.T) {
		v := NewMarket()
		now := wiretest.Time
		var leases []wire.LeaseTerms
		for step := range rapid.IntRange(1, 120).Draw(rt, "steps") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				sub := rapid.SampledFrom(subs).Draw(rt, "submitter")
				v.AddJob(&OpenJob{ID: fmt.Sprint("job-", step), Submitter: sub.ID, Body: body, Seen: now, Signed: now})
			case 2, 3:
				prov, sub := rapid.SampledFrom(provs).Draw(rt, "provider"), rapid.SampledFrom(subs).Draw(rt, "submitter")
				terms := wiretest.Terms(prov.ID, sub.ID)
				terms.ID, terms.Job = fmt.Sprint("lease-", step), fmt.Sprint("job-", rapid.IntRange(0, step).Draw(rt, "job"))
				terms.GPUs = terms.GPUs[:rapid.IntRange(1, 2).Draw(rt, "gpus")]
				terms.Proposed = now.UnixMilli()
				terms.Limit = market.Duration(rapid.Int64Range(1, 4).Draw(rt, "hours")) * market.Hour
				skew := time.Duration(rapid.IntRange(-30, 30).Draw(rt, "skew")) * time.Second
				v.AddLease(wire.SignedLease{Terms: terms, ProviderSig: []byte{1}, SubmitterSig: []byte{1}}, Stamp{Signed: now.Add(skew), Arrived: now})
				leases = append(leases, terms)
			case 4, 5:
				// A release of a known lease, or early, of one not yet
				// announced (announced later or never).
				var lease wire.LeaseTerms
				if len(leases) > 0 && rapid.Bool().Draw(rt, "known") {
					lease = rapid.SampledFrom(leases).Draw(rt, "lease")
				} else {
					prov, sub := rapid.SampledFrom(provs).Draw(rt, "provider"), rapid.SampledFrom(subs).Draw(rt, "submitter")
					lease = wiretest.Terms(prov.ID, sub.ID)
					lease.ID = fmt.Sprint("lease-", step+rapid.IntRange(1, 5).Draw(rt, "ahead"))
				}
				held := rapid.Int64Range(0, 3*3600_000).Draw(rt, "held")
				by, _ := peer.Decode(lease.Provider)
				v.ReleaseLease(wire.ReleaseBody{Lease: lease.ID, Provider: lease.Provider, Submitter: lease.Submitter, GPUs: lease.GPUs, HeldMs: held, At: now.UnixMilli()}, by, Local(now))
			case 6:
				v.Prune(now, time.Hour, 10*time.Minute)
			case 7, 8:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(90*time.Second)).Draw(rt, "pause")))
			case 9:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Hour)).Draw(rt, "long pause")))
			}
			if !rapid.Bool().Draw(rt, "look") {
				continue
			}
			var offers []SignedOffer
			for _, p := range provs {
				if rapid.Bool().Draw(rt, "offer") {
					o := market.Offer{Provider: p.ID.String(), CPUs: 64, MemoryBytes: 256 << 30}
					for g, u := range wiretest.Terms(p.ID, p.ID).GPUs {
						o.GPUs = append(o.GPUs, market.GPU{Index: g, UUID: u, Model: "H100", MemoryBytes: 80 << 30, Free: rapid.Bool().Draw(rt, "free")})
					}
					offers = append(offers, SignedOffer{Offer: o, SignedAt: now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(rt, "offer age")) * time.Second).UnixMilli()})
				}
			}
			cutoff := now.Add(-time.Duration(rapid.IntRange(0, 30_000).Draw(rt, "delay")) * time.Millisecond)
			mv := v.snapshot(cutoff, now, offers, nil, func(newest time.Time) (uint64, time.Time) { return 0, now })
			var submitters []string
			for _, j := range mv.Jobs {
				submitters = append(submitters, j.Submitter)
			}
			live, usage, newest := scanLeases(v, cutoff, now, offers, submitters, now.UnixMilli())
			byID := func(a, b market.Lease) int { return strings.Compare(a.ID, b.ID) }
			slices.SortFunc(live, byID)
			got := slices.Clone(mv.Leases)
			slices.SortFunc(got, byID)
			if fmt.Sprint(got) != fmt.Sprint(live) {
				rt.Fatalf("step %d: live leases %v, a full walk gives %v", step, got, live)
			}
			for _, u := range mv.Usage {
				if usage[u.Submitter] != u.GPUMillis {
					rt.Fatalf("step %d: use of %s %d, a full walk gives %d", step, u.Submitter, u.GPUMillis, usage[u.Submitter])
				}
				delete(usage, u.Submitter)
			}
			for s, u := range usage {
				if u != 0 {
					rt.Fatalf("step %d: no use of %s in the view, a full walk gives %d", step, s, u)
				}
			}
			// The view's Now, given by the newest signing time, must not
			// move either: leases are part of it.
			var seen time.Time
			v.snapshot(cutoff, now, offers, nil, func(n time.Time) (uint64, time.Time) { seen = n; return 0, now })
			if want := latestWithRest(v, cutoff, now, offers, newest); !seen.Equal(want) {
				rt.Fatalf("step %d: newest %v, a full walk gives %v", step, seen, want)
			}
		}
	})
}

// latestWithRest is the newest signing time of a view: that of the
// leases, given, and of the offers and jobs it holds.
func latestWithRest(v *Market, cutoff, arrivedBy time.Time, offers []SignedOffer, leases time.Time) time.Time {
	n := leases
	later := func(t time.Time) {
		if t.After(n) {
			n = t
		}
	}
	for _, o := range offers {
		later(time.UnixMilli(o.SignedAt))
	}
	for _, j := range v.jobs {
		if st := (Stamp{j.Signed, j.Seen}); st.In(cutoff, arrivedBy) && !j.closed.In(cutoff, arrivedBy) {
			later(signedOf(st))
		}
	}
	return n
}
