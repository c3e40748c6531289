package scale

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

func testClassNet(t *testing.T, n int) *classNet {
	t.Helper()
	c, err := newClassNet("scale", n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The far network is the mix: every kind's class is there, in the
// shares asked, and each class is split as the daemon is told to split it.
func TestClassNetMix(t *testing.T) {
	c := testClassNet(t, 4000)
	want := map[string]int{
		"consumer-24G": 2380, "H100x8": 480, "H100x1-4": 360, "A100x8": 180, "A100x1-4": 180, "H200x8": 400, "B200x8": 20,
	}
	got := map[string]int{}
	for _, s := range c.sizes() {
		got[s.Class] = s.Providers
		if s.Subshards != p2p.SuggestShards(s.Providers) {
			t.Errorf("class %s of %d providers in %d subshards, want %d", s.Class, s.Providers, s.Subshards, p2p.SuggestShards(s.Providers))
		}
	}
	for class, n := range want {
		if got[class] != n {
			t.Errorf("class %s has %d providers, want %d (all: %v)", class, got[class], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("classes %v, want those of %v", got, want)
	}
	members := 0
	for j := range c.subs {
		s := &c.subs[j]
		members += len(s.members)
		if len(s.members) > 2*p2p.ShardProviders {
			t.Errorf("subshard %s holds %d providers", s.shard, len(s.members))
		}
		for _, i := range s.members {
			if c.sub[i] != j {
				t.Fatalf("provider %d is a member of %s but placed in subshard %d", i, s.shard, c.sub[i])
			}
		}
	}
	if members != 4000 {
		t.Errorf("%d members in all subshards, want 4000", members)
	}
	// --class-shards names every split class with its count, in a form
	// e31d reads: CLASS=N with a class and a power of two.
	flag := c.ClassShards()
	if !strings.Contains(flag, "consumer-24G=16") {
		t.Errorf("--class-shards %q: want consumer-24G=16 among them", flag)
	}
	for _, kv := range strings.Split(flag, ",") {
		class, n, ok := strings.Cut(kv, "=")
		count, err := strconv.Atoi(n)
		if _, perr := market.ParseClass(class); !ok || err != nil || perr != nil || (p2p.Shard{Count: count}).Valid() != nil {
			t.Errorf("--class-shards entry %q is not CLASS=N", kv)
		}
	}
}

// Each provider's offer is what the offers topic of its subshard accepts,
// and no other subshard's; it lists up to maxHeld held roots.
func TestClassNetOffersValidate(t *testing.T) {
	c := testClassNet(t, 1500)
	held, largest := 0, 0
	for i := range c.ids {
		b := c.offer(i)
		s, err := p2p.Seal(c.keys[i], wire.KindOffer, b, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		opened, err := p2p.Open(s.Raw)
		if err != nil {
			t.Fatal(err)
		}
		shard := c.subs[c.sub[i]].shard
		if err := wire.OfferValidator(shard)(opened); err != nil {
			t.Fatalf("provider %d's offer on the offers topic of %s: %v", i, shard, err)
		}
		if string(market.ClassOf(b.Offer.GPUs)) != shard.Class {
			t.Fatalf("provider %d's offer is of class %s, in a subshard of %s", i, market.ClassOf(b.Offer.GPUs), shard.Class)
		}
		other := shard
		other.Index = (other.Index + 1) % other.Count
		if other != shard && wire.OfferValidator(other)(opened) == nil {
			t.Fatalf("provider %d's offer of %s accepted on the offers topic of %s", i, shard, other)
		}
		n := len(b.Offer.Holdings.Roots)
		if n > maxHeld {
			t.Fatalf("provider %d lists %d held roots, at most %d", i, n, maxHeld)
		}
		if n > 0 {
			held++
		}
		largest = max(largest, len(s.Raw))
	}
	if held < len(c.ids)*9/10 {
		t.Errorf("%d of %d providers list anything held", held, len(c.ids))
	}
	if largest < 3000 {
		t.Errorf("the largest offer is %d bytes: holdings do not make offers as large as real ones", largest)
	}
}

// Every subshard's digest, signed by the member elected for the round,
// is one every peer's digest topic accepts, and counts its providers.
func TestClassNetDigestsValidate(t *testing.T) {
	c := testClassNet(t, 3000)
	now := time.Now()
	book := digest.NewBook(digest.Timing{}, func() time.Time { return now })
	c.leased[c.subs[0].members[0]].Store(1)
	c.subs[0].open.Store(3)
	forgers := 0
	for j := range c.subs {
		s := &c.subs[j]
		p := c.publisher(j, now, time.Minute)
		if c.sub[p] != j {
			t.Fatalf("the publisher of %s is provider %d, of subshard %d", s.shard, p, c.sub[p])
		}
		b := c.digest(j, now, 30*time.Second)
		signed, err := p2p.Seal(c.keys[p], wire.KindDigest, b, now)
		if err != nil {
			t.Fatal(err)
		}
		opened, err := p2p.Open(signed.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := book.Validate(opened); err != nil {
			t.Fatalf("the digest of %s: %v", s.shard, err)
		}
		if b.Providers != len(s.members) || len(b.Members) == 0 {
			t.Fatalf("the digest of %s counts %d providers and %d members, want %d and some", s.shard, b.Providers, len(b.Members), len(s.members))
		}
		// A provider of another subshard of the class may not sign it.
		if s.shard.Count == 1 {
			continue
		}
		forgers++
		q := slices.IndexFunc(c.sub, func(k int) bool { return k != j && c.subs[k].shard.Class == s.shard.Class })
		forged, err := p2p.Seal(c.keys[q], wire.KindDigest, b, now)
		if err != nil {
			t.Fatal(err)
		}
		if wire.ValidateDigest(forged) == nil {
			t.Fatalf("the digest of %s accepted from provider %d of another subshard", s.shard, q)
		}
	}
	if forgers == 0 {
		t.Error("no class split into subshards: no digest was tried from another subshard")
	}
	if got := len(book.All()); got != len(c.subs) {
		t.Errorf("the book holds %d digests, want one of each of %d subshards", got, len(c.subs))
	}
	b := c.digest(0, now, 30*time.Second)
	if b.Queued != 3 || b.OldestWaitMs != 30_000 {
		t.Errorf("the digest of %s counts %d queued, the oldest %d ms, want 3 and 30000", c.subs[0].shard, b.Queued, b.OldestWaitMs)
	}
	if len(b.FreeBoxes) == 0 || b.FreeBoxes[len(b.FreeBoxes)-1] == b.Providers {
		t.Errorf("the digest of %s shows no box with a GPU leased: free boxes %v", c.subs[0].shard, b.FreeBoxes)
	}
}

// Far jobs are declared in their provider's subshard, in a form the jobs
// topic of that subshard accepts, asking what its class's boxes hold.
func TestClassNetDeclarationsFit(t *testing.T) {
	c := testClassNet(t, 1000)
	f, err := newClassFar(c, 3, []*neighbour{{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.ids {
		b := c.declaration(i, i)
		shard := c.subs[c.sub[i]].shard
		if err := wire.CheckMarket(b, shard); err != nil {
			t.Fatalf("job %d on the jobs topic of %s: %v", i, shard, err)
		}
		if !market.Class(shard.Class).Fits(b.Declaration.Request) {
			t.Fatalf("job %d asks %+v, which class %s does not fit", i, b.Declaration.Request, shard.Class)
		}
		s, err := p2p.Seal(f.submitters[i%3], wire.KindDeclaration, b, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.ValidateJobMessage(s); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
}

// take leases a box's GPUs until none is left, and never the same twice.
func TestClassFarTake(t *testing.T) {
	c := testClassNet(t, 200)
	f := &classFar{net: c}
	p := slices.IndexFunc(c.kinds, func(k boxKind) bool { return k.gpus == 8 })
	var got []uint64
	for {
		bits, ok := f.take(p, 2)
		if !ok {
			break
		}
		got = append(got, bits)
	}
	if len(got) != 4 || c.leased[p].Load() != 0xff {
		t.Fatalf("took %x of an 8-GPU box, leased %x; want four pairs, all leased", got, c.leased[p].Load())
	}
	c.leased[p].And(^got[1])
	if bits, ok := f.take(p, 2); !ok || bits != got[1] {
		t.Fatalf("after a release took %x, %v; want %x again", bits, ok, got[1])
	}
}

// The table sets runs side by side, doubles the goals past 10,000
// providers and holds 100,000 to twice 10,000.
func TestRolesTable(t *testing.T) {
	run := func(role string, providers int, in, cores float64) Report {
		m := Measured{BytesInPerS: in, BytesOutPerS: in / 2, CPUCores: cores, RSSBytes: 100e6}
		return Report{Providers: providers, Measured: m, Classes: &ClassReport{Role: role}}
	}
	tbl, err := NewRolesTable([]Report{
		run(RoleProvider, 100000, 350e3, 0.1), run(RoleProvider, 10000, 150e3, 0.04), run(RoleSubmitter, 10000, 60e3, 0.01),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 3 || tbl.Rows[0].Providers != 10000 || tbl.Rows[1].Providers != 100000 || tbl.Rows[2].Role != RoleSubmitter {
		t.Fatalf("rows %+v: want provider at 10,000 then 100,000, then the submitter", tbl.Rows)
	}
	if g := tbl.Rows[1].Goals[0]; g.Limit != 400e3 || !g.Met {
		t.Errorf("a provider at 100,000: %+v, want a goal of 400 KB/s in, met", g)
	}
	if g := tbl.Rows[2].Goals[0]; g.Limit != 50e3 || g.Met {
		t.Errorf("a submitter at 60 KB/s in: %+v, want a goal of 50 KB/s, not met", g)
	}
	var in, cores ScaleCheck
	for _, c := range tbl.Scaling {
		switch c.Figure {
		case "bytes in per s":
			in = c
		case "cores":
			cores = c
		}
	}
	if in.Met || cores.Met || in.Ratio < 2.3 || len(tbl.Scaling) != 4 {
		t.Errorf("scaling %+v: want 4 figures of the provider, bytes in (x2.33) and cores (x2.5) not within 2x", tbl.Scaling)
	}
	raw, err := json.Marshal(tbl)
	if err != nil || !strings.Contains(string(raw), `"scaling"`) {
		t.Errorf("the table's JSON %s: %v", raw, err)
	}
	var text strings.Builder
	if err := tbl.WriteText(&text); err != nil || !strings.Contains(text.String(), "NOT within 2x") {
		t.Errorf("the table's text:\n%s%v", text.String(), err)
	}
	if _, err := NewRolesTable([]Report{{Providers: 10}}); err == nil {
		t.Error("a report of a hash-sharded run was set in the table")
	}
}
