package view

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"pgregory.net/rapid"
)

// The window's quantile is the nearest-rank quantile of the last size
// samples, checked against sorting them from scratch.
func TestGossipDelaysQuantileOfTheLastSamples(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 64).Draw(t, "size")
		ms := rapid.SliceOf(rapid.Int64Range(-50, 5000)).Draw(t, "delays")
		q := rapid.SampledFrom([]float64{0.01, 0.5, 0.9, 0.99, 1}).Draw(t, "q")
		w := NewGossipDelays(size)
		signed := time.UnixMilli(1_700_000_000_000)
		for _, d := range ms {
			w.Observe(signed, signed.Add(time.Duration(d)*time.Millisecond))
		}
		got, ok := w.Quantile(q)
		if len(ms) == 0 {
			if ok {
				t.Fatalf("empty window gave %s", got)
			}
			return
		}
		last := slices.Clone(ms[max(len(ms)-size, 0):])
		for i := range last {
			last[i] = max(last[i], 0)
		}
		slices.Sort(last)
		// Nearest rank, stated the slow way: the smallest sample with at
		// least q of the samples at or below it.
		var want int64
		for _, c := range last {
			at := 0
			for _, o := range last {
				if o <= c {
					at++
				}
			}
			if float64(at) >= q*float64(len(last))-1e-9 {
				want = c
				break
			}
		}
		if !ok || got != time.Duration(want)*time.Millisecond {
			t.Fatalf("q%.2f of %v = %s, %v; want %dms", q, last, got, ok, want)
		}
	})
}

func TestGossipDelaysAnnounced(t *testing.T) {
	w := NewGossipDelays(100)
	if got := w.Announced(); got != 0 {
		t.Fatalf("no samples announced %dms, want 0 (no figure)", got)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	w.Observe(t0, t0.Add(300*time.Microsecond))
	if got := w.Announced(); got != 1 {
		t.Fatalf("a sub-millisecond p99 announced as %dms, want 1", got)
	}
	for i := range 99 {
		w.Observe(t0, t0.Add(time.Duration(i+1)*time.Millisecond))
	}
	if got := w.Announced(); got != 98 {
		t.Fatalf("p99 of 0.3ms and 1..99ms announced as %dms, want 98", got)
	}
	// A node that stalled for minutes measures what queued as that late;
	// its offers must still pass every peer's check, its own included.
	for range 100 {
		w.Observe(t0, t0.Add(3*time.Minute))
	}
	got := w.Announced()
	if got != wire.MaxGossipP99Ms {
		t.Fatalf("p99 of 3 minutes announced as %dms, want the bound %dms", got, wire.MaxGossipP99Ms)
	}
	self := wiretest.FreshParty(t)
	b := wiretest.Offer(self.ID)
	b.GossipP99Ms = got
	if err := wire.ValidateOffer(wiretest.OnWire(t, self, wire.KindOffer, b)); err != nil {
		t.Fatalf("an offer announcing %dms refused: %v", got, err)
	}
}

func TestDelayRule(t *testing.T) {
	r := DelayRule{Epoch: time.Second, Floor: 20 * time.Millisecond, Fallback: 150 * time.Millisecond}
	offers := func(p99s ...int64) []SignedOffer {
		var out []SignedOffer
		for i, p := range p99s {
			out = append(out, SignedOffer{Offer: market.Offer{Provider: fmt.Sprintf("p%d", i)}, GossipP99Ms: p})
		}
		return out
	}
	for _, c := range []struct {
		name string
		p99s []int64
		want time.Duration
	}{
		{"no offers", nil, 150 * time.Millisecond},
		{"no figure yet", []int64{0, 0}, 150 * time.Millisecond},
		{"a LAN", []int64{3, 8, 0}, 20 * time.Millisecond},
		{"the small margin", []int64{12}, 22 * time.Millisecond},
		{"the slowest provider decides", []int64{40, 300, 120}, 375 * time.Millisecond},
		{"at most half an epoch", []int64{450}, 500 * time.Millisecond},
		{"a hostile figure", []int64{wire.MaxGossipP99Ms, 1 << 62}, 500 * time.Millisecond},
	} {
		if got := r.Delay(offers(c.p99s...)); got != c.want {
			t.Errorf("%s: delay %s, want %s", c.name, got, c.want)
		}
	}
	if got := (DelayRule{Epoch: 100 * time.Millisecond, Fallback: 150 * time.Millisecond}).Delay(nil); got != 50*time.Millisecond {
		t.Errorf("fallback beyond half a short epoch: %s, want 50ms", got)
	}
}

// Peers that hold the same offers signed by the announcement cut derive the
// same delay, whatever order and at whatever time before the epoch the
// offers reached them, and whatever each of them observed itself; offers
// signed after the cut do not count, though they arrived.
func TestSameOffersSameDelayOnEveryPeer(t *testing.T) {
	rule := DelayRule{Epoch: time.Second, Floor: DefaultDelayFloor, Fallback: 150 * time.Millisecond}
	start := time.UnixMilli(1_700_000_001_000)
	cut := rule.AnnouncementCut(start)
	type sent struct {
		body     wire.OfferBody
		signedAt time.Time
	}
	var all []sent
	for i := range 5 {
		id := wiretest.SeededParty(t, byte(10+i)).ID
		// Each provider published several offers: before the cut with one
		// figure, after it with a larger one.
		for k, at := range []time.Duration{-3 * time.Second, -900 * time.Millisecond, -600 * time.Millisecond, -400 * time.Millisecond, -10 * time.Millisecond} {
			b := wiretest.Offer(id)
			b.GossipP99Ms = int64(20*i + 50*k)
			all = append(all, sent{b, start.Add(at)})
		}
	}
	var delays []time.Duration
	var views [][]SignedOffer
	for peer := range 8 {
		rng := rand.New(rand.NewPCG(uint64(peer), 7))
		type arrival struct {
			sent
			at time.Time
		}
		var order []arrival
		for _, s := range all {
			// Anything from no delay up to just under the cut's distance
			// from the epoch's start, so one provider's offers overtake
			// one another.
			order = append(order, arrival{s, s.signedAt.Add(time.Duration(rng.Int64N(int64(rule.Epoch / 2))))})
		}
		slices.SortFunc(order, func(a, b arrival) int { return a.at.Compare(b.at) })
		v := NewOffers()
		for _, a := range order {
			v.Apply(a.body, a.signedAt.UnixMilli(), a.at)
		}
		at := v.At(cut, start)
		views = append(views, at)
		delays = append(delays, rule.Delay(at))
	}
	for i := range views {
		if !slices.EqualFunc(views[i], views[0], func(a, b SignedOffer) bool {
			return a.Provider == b.Provider && a.SignedAt == b.SignedAt && a.GossipP99Ms == b.GossipP99Ms
		}) {
			t.Fatalf("peer %d holds other offers at the cut:\n%v\nvs\n%v", i, views[i], views[0])
		}
		if delays[i] != delays[0] {
			t.Fatalf("peer %d derived delay %s, peer 0 %s", i, delays[i], delays[0])
		}
	}
	// Provider 4's last offer before the cut (signed 600ms before the
	// start) announced 20·4 + 50·2 = 180ms: delay 180 + 45.
	if want := 225 * time.Millisecond; delays[0] != want {
		t.Fatalf("delay %s, want %s", delays[0], want)
	}
}

// Two peers receiving a declaration at different times but before the
// cutoff (the one just after it too) both cut it by its signing time.
func TestSnapshotCutsOnSigningTime(t *testing.T) {
	sub := wiretest.FreshParty(t)
	start := time.UnixMilli(1_700_000_001_000)
	cutoff := start.Add(-200 * time.Millisecond)
	build := func(arrival time.Duration) market.View {
		v := NewMarket()
		signed := cutoff.Add(-time.Millisecond)
		v.AddJob(&OpenJob{ID: "before", Submitter: sub.ID, Seen: signed.Add(arrival), Signed: signed})
		late := cutoff.Add(time.Millisecond)
		v.AddJob(&OpenJob{ID: "after", Submitter: sub.ID, Seen: late.Add(arrival), Signed: late})
		return v.Snapshot(1, start, cutoff, nil)
	}
	fast, slow := build(time.Millisecond), build(150*time.Millisecond)
	if len(fast.Jobs) != 1 || len(slow.Jobs) != 1 || fast.Jobs[0].ID != "before" || slow.Jobs[0].ID != "before" {
		t.Fatalf("jobs in the views: fast %v, slow %v; want only the one signed before the cutoff in both", fast.Jobs, slow.Jobs)
	}
	// A job signed long before the cutoff that arrived after it, but
	// before the start, counts: every peer that held it by the start cut
	// it alike (one that did not is late, whatever the rule).
	v := NewMarket()
	v.AddJob(&OpenJob{ID: "backdated", Submitter: sub.ID, Seen: cutoff.Add(time.Millisecond), Signed: cutoff.Add(-time.Hour)})
	if got := v.Snapshot(1, start, cutoff, nil); len(got.Jobs) != 1 {
		t.Fatalf("a job signed before the cutoff and held at the start is missing: %v", got.Jobs)
	}
	// A peer that cuts late (its timer fired late) leaves out what
	// reached it after the start, as a punctual peer could not count it.
	v = NewMarket()
	v.AddJob(&OpenJob{ID: "after the start", Submitter: sub.ID, Seen: start.Add(time.Millisecond), Signed: cutoff.Add(-time.Second)})
	if got := v.Snapshot(1, start, cutoff, nil); len(got.Jobs) != 0 {
		t.Fatalf("a job that arrived after the epoch's start counts: %v", got.Jobs)
	}
	// A job whose author's clock runs ahead counts from its arrival.
	v = NewMarket()
	v.AddJob(&OpenJob{ID: "ahead", Submitter: sub.ID, Seen: cutoff.Add(time.Millisecond), Signed: cutoff.Add(time.Hour)})
	if got := v.Snapshot(1, start, cutoff, nil); len(got.Jobs) != 0 {
		t.Fatalf("a job that arrived after the cutoff counts: %v", got.Jobs)
	}
}

// The offer view keeps a few past offers, so a provider that changed its
// offer twice since the cutoff is still cut as it stood then.
func TestOffersAtKeepsPastOffers(t *testing.T) {
	id := wiretest.SeededParty(t, 1).ID
	v := NewOffers()
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 6 {
		b := wiretest.Offer(id)
		b.GossipP99Ms = int64(i + 1)
		signed := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		v.Apply(b, signed.UnixMilli(), signed.Add(30*time.Millisecond))
	}
	for _, c := range []struct {
		cut  time.Duration
		want int64 // the figure of the offer the cut should take; 0: none
	}{
		{-time.Millisecond, 0},
		{0, 0}, // kept versions: signed at 100ms..500ms; the first is gone
		{100 * time.Millisecond, 2},
		{250 * time.Millisecond, 3},
		{500 * time.Millisecond, 6},
	} {
		got := v.At(t0.Add(c.cut), t0.Add(time.Hour))
		switch {
		case c.want == 0 && len(got) != 0:
			t.Errorf("cut at %s: %v, want no offer", c.cut, got)
		case c.want != 0 && (len(got) != 1 || got[0].GossipP99Ms != c.want):
			t.Errorf("cut at %s: %v, want the offer announcing %dms", c.cut, got, c.want)
		}
	}
	// Signed by the cutoff but arrived after the start: the cut takes the
	// offer before it, as a peer cutting on time did.
	last := t0.Add(500 * time.Millisecond)
	if got := v.At(last, last.Add(20*time.Millisecond)); len(got) != 1 || got[0].GossipP99Ms != 5 {
		t.Errorf("offer arrived after the start: cut took %v, want the one announcing 5ms", got)
	}
}

// Removals count by their stamps as additions do: a lease signed by the
// cutoff that arrived by the start closes its job and holds its GPUs in
// the view; one signed after the cutoff, or arrived after the start, does
// not yet.
func TestSnapshotCutsRemovalsOnStamps(t *testing.T) {
	sub := wiretest.FreshParty(t)
	prov := wiretest.FreshParty(t)
	start := time.UnixMilli(1_700_000_001_000)
	cutoff := start.Add(-200 * time.Millisecond)
	for _, c := range []struct {
		name    string
		at      Stamp
		counted bool
	}{
		{"signed and arrived in time", Stamp{cutoff.Add(-time.Millisecond), start.Add(-time.Millisecond)}, true},
		{"signed after the cutoff", Stamp{cutoff.Add(time.Millisecond), start.Add(-time.Millisecond)}, false},
		{"arrived after the start", Stamp{cutoff.Add(-time.Millisecond), start.Add(time.Millisecond)}, false},
	} {
		v := NewMarket()
		v.AddJob(&OpenJob{ID: "j", Submitter: sub.ID, Seen: start.Add(-time.Hour), Signed: start.Add(-time.Hour)})
		terms := wire.LeaseTerms{ID: "l", Job: "j", Provider: prov.ID.String(), Submitter: sub.ID.String(),
			GPUs: []string{"GPU-0"}, Limit: market.Hour, Proposed: c.at.Signed.UnixMilli()}
		v.AddLease(wire.SignedLease{Terms: terms}, c.at)
		mv := v.Snapshot(1, start, cutoff, nil)
		if leased := len(mv.Jobs) == 0 && len(mv.Leases) == 1; leased != c.counted {
			t.Errorf("%s: jobs %v, leases %v; want the lease counted: %v", c.name, mv.Jobs, mv.Leases, c.counted)
		}
	}
}
