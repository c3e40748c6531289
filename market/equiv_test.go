package market

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The matcher's speed comes from indexes, interning and caches that the
// small views of TestMatchAgainstReference barely reach: classes large
// enough to live in a trie, hundreds of submitters, ties on SubmittedAt,
// many request shapes. The tests here draw views of that size.

// randomLargeView draws a view of up to a few hundred providers and a few
// thousand jobs, with many identical offers (so that classes outgrow
// smallClass and move to tries), leases, duplicate keys, invalid requests,
// image and reachability flags, and jobs that tie on SubmittedAt. With
// dups, some offers and jobs repeat a key with other contents.
func randomLargeView(rng *rand.Rand, dups bool) (View, Options) {
	now := scenarioStart + rng.Int64N(1_000_000)
	v := View{Epoch: rng.Uint64N(100), Now: now}
	type kind struct {
		model string
		mem   uint64
		n     int
	}
	kinds := []kind{
		{"NVIDIA H100 80GB HBM3", uint64(80 * GiB), 8},
		{"NVIDIA A100-SXM4-40GB", uint64(40 * GiB), 8},
		{"NVIDIA H100 80GB HBM3", uint64(80 * GiB), 4},
		{"H1000", uint64(80 * GiB), 2},
	}
	nProv := rng.IntN(300)
	for p := range nProv {
		k := kinds[0]
		if rng.IntN(3) == 0 {
			k = kinds[rng.IntN(len(kinds))]
		}
		id := fmt.Sprintf("12D3KooWlarge%05d", p)
		o := Offer{Provider: id, CPUs: 128, MemoryBytes: uint64(1 * TiB)}
		if rng.IntN(8) == 0 {
			o.CPUs, o.MemoryBytes = 16, uint64(64*GiB)
		}
		o.Images = rng.IntN(4) != 0
		o.RequireImage = rng.IntN(20) == 0
		o.Unreachable = rng.IntN(30) == 0
		busy := 0
		if rng.IntN(2) == 0 {
			busy = rng.IntN(k.n + 1)
		}
		var leased []string
		for g := range k.n {
			uuid := fmt.Sprintf("GPU-%05d-%d", p, g)
			o.GPUs = append(o.GPUs, GPU{Index: g, UUID: uuid, Model: k.model, MemoryBytes: k.mem, Free: g >= busy || rng.IntN(10) == 0})
			if g < busy {
				leased = append(leased, uuid)
			}
		}
		v.Offers = append(v.Offers, o)
		for len(leased) > 0 {
			n := min(len(leased), 1<<rng.IntN(3))
			limit := Duration(rng.IntN(4)+1) * Hour
			v.Leases = append(v.Leases, Lease{
				ID: fmt.Sprintf("lease-%05d-%d", p, len(leased)), Job: fmt.Sprintf("running-%05d-%d", p, len(leased)),
				Provider: id, Submitter: "x", GPUs: leased[:n], CPUs: 4 * n, MemoryBytes: uint64(32*GiB) * uint64(n),
				Start: now - rng.Int64N(int64(limit)), Limit: limit,
			})
			leased = leased[n:]
		}
		if dups && rng.IntN(50) == 0 {
			o.CPUs++ // a duplicate offer with other contents
			v.Offers = append(v.Offers, o)
		}
	}
	nSubs := 1 + rng.IntN(200)
	nJobs := rng.IntN(3000)
	sizes := []int{1, 1, 1, 2, 2, 3, 4, 8, 9}
	for j := range nJobs {
		r := Request{GPUs: sizes[rng.IntN(len(sizes))], CPUs: 1 << rng.IntN(6), Memory: Size(1<<rng.IntN(7)) * GiB, Limit: Duration(rng.IntN(6)+1) * 30 * Minute}
		switch rng.IntN(12) {
		case 0:
			r.GPUModel = "A100"
		case 1:
			r.GPUModel = "H100"
			r.GPUMemory = 64 * GiB
		case 2:
			r.GPUs = 0
		case 3:
			r.GPUModel = "h1000"
		case 4:
			r.CPUs = 0 // invalid
		}
		id := fmt.Sprintf("job-%06d", j)
		if j%97 == 0 && len(v.Leases) > 0 {
			id = v.Leases[j%len(v.Leases)].Job // already running
		}
		if dups && j%101 == 0 && j > 0 {
			id = v.Jobs[j-1].ID // the same ID with another request
		}
		v.Jobs = append(v.Jobs, Job{
			ID: id, Submitter: fmt.Sprintf("sub%03d", rng.IntN(nSubs)),
			// Coarse ages, so that many jobs tie on SubmittedAt.
			SubmittedAt: now - int64(rng.IntN(40))*int64(30*Second),
			Request:     r, Image: rng.IntN(3) == 0,
		})
	}
	for s := range nSubs {
		if rng.IntN(3) != 0 {
			v.Usage = append(v.Usage, Usage{Submitter: fmt.Sprintf("sub%03d", s), GPUMillis: rng.Int64N(int64(50 * Hour))})
		}
	}
	o := Options{
		Reservations:  []int{-1, 0, 1, 8}[rng.IntN(4)],
		StarvingAfter: []Duration{0, -1, 5 * Minute}[rng.IntN(3)],
	}
	return v, o
}

// TestMatchLargeAgainstReference checks Match against the plain matcher on
// views large enough to use every index and cache.
func TestMatchLargeAgainstReference(t *testing.T) {
	n := 16
	if testing.Short() {
		n = 4
	}
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 12))
		v, o := randomLargeView(rng, false)
		got, want := Match(v, o), refMatch(v, o)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d (%d offers, %d jobs, %+v): Match and the reference differ", i, len(v.Offers), len(v.Jobs), o)
		}
	}
}

// TestMatchLocalityAgainstReference is the same check on large views in
// which jobs read data that offers hold, listed or in a filter.
func TestMatchLocalityAgainstReference(t *testing.T) {
	n := 8
	if testing.Short() {
		n = 2
	}
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 14))
		v, o := randomLargeView(rng, false)
		if len(v.Offers) == 0 {
			continue
		}
		addLocality(rng, &v)
		got, want := Match(v, o), refMatch(v, o)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d (%d offers, %d jobs, %+v): Match and the reference differ", i, len(v.Offers), len(v.Jobs), o)
		}
	}
}

// TestMatchGangsAgainstReference is the same check on large views with
// gangs, some of them in flight, among the jobs.
func TestMatchGangsAgainstReference(t *testing.T) {
	n := 8
	if testing.Short() {
		n = 2
	}
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 16))
		v, o := randomLargeView(rng, false)
		if len(v.Offers) == 0 {
			continue
		}
		addGangs(rng, &v)
		if i%2 == 1 {
			addLocality(rng, &v)
		}
		got, want := Match(v, o), refMatch(v, o)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d (%d offers, %d jobs, %+v): Match and the reference differ", i, len(v.Offers), len(v.Jobs), o)
		}
	}
}

// resultDigest is the SHA-256 of a Result's JSON: what peers must agree on,
// byte for byte.
func resultDigest(r Result) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestMatchGolden pins the exact Result of large views, the benchmark's
// among them, as Match gave them before it was optimised: any change to
// the matcher's speed must leave every byte of its decisions alone. A
// deliberate change of the rules updates the digests.
func TestMatchGolden(t *testing.T) {
	cases := []struct {
		name string
		view func() (View, Options)
		want string
	}{
		{"random0", func() (View, Options) { return randomLargeView(rand.New(rand.NewPCG(1000, 12)), true) }, "c87716e3f552bd29d1526895d8e82000d0a9acf5d6e7b64fd097e7786c598047"},
		{"random1", func() (View, Options) { return randomLargeView(rand.New(rand.NewPCG(1001, 12)), true) }, "dc17db7568b6bbb6f989a3a9608f74cb65726a75d6fc2389a6523d44dd843a91"},
		{"random2", func() (View, Options) { return randomLargeView(rand.New(rand.NewPCG(1002, 12)), true) }, "e7c8edff4f0c07250ef3e89f3d1703f660349a393d05fa788cd28d1aaabc8ed2"},
		{"bench1k", func() (View, Options) { return benchView(1_000, 10_000), Options{} }, "201531b6fc03f69fa3be939eaea83a02df81fb9561c643b6ab0ed2b75511901d"},
		{"bench10k", func() (View, Options) { return benchView(10_000, 100_000), Options{} }, "eca1334795e82d026a27aa3f5d7dfe6af8b65e67a184a858c375a4d8bd9564eb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name == "bench10k" {
				t.Skip("large view")
			}
			v, o := c.view()
			if got := resultDigest(Match(v, o)); got != c.want {
				t.Errorf("result digest %s, want %s", got, c.want)
			}
		})
	}
}
