package market

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	"pgregory.net/rapid"
)

// testCID is a real CIDv1 (59 characters in base32, which is what sizes
// an offer).
func testCID(i int) string {
	h, err := multihash.Sum(fmt.Append(nil, i), multihash.SHA2_256, -1)
	if err != nil {
		panic(err)
	}
	return cid.NewCidV1(cid.DagProtobuf, h).String()
}

// TestHoldingsFitGossip checks the sizing: a provider holding thousands of
// roots still sends holdings that leave most of the 64KiB payload to the
// rest of its offer, and every root it holds tests as held.
func TestHoldingsFitGossip(t *testing.T) {
	const n = MaxHeldRoots + HoldingsBloomCapacity
	held := make([]Datum, n)
	for i := range held {
		held[i] = Datum{Root: testCID(i), Size: uint64(i+1) * uint64(MiB)}
	}
	h := NewHoldings(held)
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 24<<10 {
		t.Errorf("holdings of %d roots take %d bytes of JSON, want at most 24KiB", n, len(b))
	}
	t.Logf("%d roots: %d bytes of JSON, %d listed, filter %d bytes", n, len(b), len(h.Roots), len(h.Bloom))
	if len(h.Roots) != MaxHeldRoots || h.Roots[0].Root > h.Roots[1].Root {
		t.Fatalf("want the %d largest roots listed in root order", MaxHeldRoots)
	}
	for _, d := range h.Roots {
		if d.Size <= uint64(n-MaxHeldRoots)*uint64(MiB) {
			t.Fatalf("listed %s of %d bytes, not among the largest", d.Root, d.Size)
		}
	}
	f, err := decodeBloom(h.Bloom)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range held[:n-MaxHeldRoots] {
		if !f.TestString(d.Root) {
			t.Fatalf("%s is held but not in the filter", d.Root)
		}
	}
	// False positives, measured on roots not held: the filter is built
	// for 1%.
	fp := 0
	for i := range 10000 {
		if f.TestString(testCID(n + i)) {
			fp++
		}
	}
	if fp > 200 {
		t.Errorf("%d false positives in 10000, want about 100", fp)
	}
}

// TestHoldingsDeterministic checks that the bytes depend only on the set
// of roots held: every peer must read the same offer, and a provider that
// rebuilds its holdings from the same cache sends the same bytes.
func TestHoldingsDeterministic(t *testing.T) {
	held := make([]Datum, 600)
	for i := range held {
		held[i] = Datum{Root: testCID(i), Size: uint64(i%50) * uint64(GiB)}
	}
	want := NewHoldings(held)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		s := slices.Clone(held)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		s = append(s, s[rng.IntN(len(s))]) // a root given twice counts once
		if got := NewHoldings(s); !got.Equal(want) {
			t.Fatal("holdings depend on the order roots were given in")
		}
	}
	if h := NewHoldings(nil); !h.IsZero() {
		t.Fatalf("nothing held gives %+v", h)
	}
	if h := NewHoldings(held[:3]); len(h.Bloom) != 0 || len(h.Roots) != 3 {
		t.Fatalf("a few roots are all listed, with no filter: %+v", h)
	}
}

func TestHoldingsCheck(t *testing.T) {
	good := NewHoldings([]Datum{{Root: testCID(1), Size: 1}, {Root: testCID(2), Size: 2}})
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	tooMany := make([]Datum, MaxHeldRoots+1)
	for i := range tooMany {
		tooMany[i] = Datum{Root: testCID(i)}
	}
	for name, h := range map[string]Holdings{
		"too many roots": {Roots: tooMany},
		"not a CID":      {Roots: []Datum{{Root: "dataset"}}},
		"unsorted":       {Roots: []Datum{good.Roots[1], good.Roots[0]}},
		"repeated":       {Roots: []Datum{good.Roots[0], good.Roots[0]}},
		"too large":      {Roots: []Datum{{Root: testCID(1), Size: MaxInputSize + 1}}},
		"short filter":   {Bloom: bloomOf("a")[:100]},
		"filter too big": {Bloom: make([]byte, 24+8*((MaxHoldingsBloomBits+64+63)/64))},
	} {
		if err := h.Check(); !errors.Is(err, ErrBadHoldings) {
			t.Errorf("%s: got %v, want ErrBadHoldings", name, err)
		}
	}
}

// TestDeclarationLocality: sizes recorded at submit and the locality
// settings are decoded, checked, and signed; a declaration without them
// signs the same bytes as before they existed.
func TestDeclarationLocality(t *testing.T) {
	d, err := DecodeDeclaration([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.Canonical()
	for _, f := range []string{"size", "locality"} {
		if strings.Contains(string(c), f) {
			t.Fatalf("canonical form mentions %s: %s", f, c)
		}
	}
	withCID := strings.Replace(base, "./in", imageCID, 1)
	ok := strings.Replace(withCID, "mount: /data}", "mount: /data, size: 100GiB}", 1)
	ok = strings.Replace(ok, "limit: 1h}", "limit: 1h, locality_wait: 30s}", 1)
	ok = strings.Replace(ok, "work:\n", "work:\n  image: "+imageCID+"\n  image_size: 5GiB\n", 1)
	d, err = DecodeDeclaration([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if d.Data[0].Size != 100*GiB || d.Work.ImageSize != 5*GiB || d.Request.LocalityWait != 30*Second {
		t.Fatalf("decoded %+v %+v %+v", d.Data[0], d.Work, d.Request)
	}
	c, err = d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var back Declaration
	if err := json.Unmarshal(c, &back); err != nil || back.Validate() != nil || back.Data[0].Size != 100*GiB {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"mount: /data}", "mount: /data, size: 2PiB}", "data[0].size: must be at most 1PiB"},
		{"mount: /data}", "mount: /data, size: -1}", "data[0].size: must be a size"},
		{"limit: 1h}", "limit: 1h, locality: on}", "request.locality: must be off or left out"},
		{"limit: 1h}", "limit: 1h, locality: off, locality_wait: 1m}", "request.locality_wait: needs locality left on"},
		{"limit: 1h}", "limit: 1h, locality_wait: 1h}", "request.locality_wait: must be a duration such as 30s, at most 5m"},
		{"work:\n", "work:\n  image_size: 1GiB\n", "work.image_size: is set at submit"},
	} {
		_, err := DecodeDeclaration([]byte(strings.Replace(withCID, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.to, err, c.want)
		}
	}
	_, err = DecodeDeclaration([]byte(strings.Replace(base, "mount: /data}", "mount: /data, size: 1GiB}", 1)))
	if err == nil || !strings.Contains(err.Error(), "data[0].size: is set at submit") {
		t.Errorf("size on a local path: %v", err)
	}
}

// visitOrder is the priority order of a pass, rebuilt from its result:
// assigned jobs at their rank, waiting ones (listed in rank order) in the
// ranks left, invalid requests last.
func visitOrder(r Result) []string {
	n := len(r.Assignments) + len(r.Waiting)
	order := make([]string, n)
	for _, a := range r.Assignments {
		if a.Rank < n {
			order[a.Rank] = a.Job
		}
	}
	i := 0
	for _, w := range r.Waiting {
		for i < n && order[i] != "" {
			i++
		}
		if i < n {
			order[i] = w.Job
		}
	}
	return order
}

// TestLocalityKeepsStarvingTier: what offers hold and jobs read changes
// where jobs go, and so which later jobs find room, but never the starving
// tier, which the wait bound rests on: it is visited first, oldest first,
// in the same order with locality or without, and none of its jobs waits
// for locality. Both passes break ties with one seed: the view hash, and
// with it the seed, differs between them.
func TestLocalityKeepsStarvingTier(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, o := genView(t, false)
		plain := v
		plain.Offers = slices.Clone(v.Offers)
		for i := range plain.Offers {
			plain.Offers[i].Holdings = Holdings{}
		}
		plain.Jobs = slices.Clone(v.Jobs)
		for i := range plain.Jobs {
			plain.Jobs[i].Data = nil
			plain.Jobs[i].Request.Locality, plain.Jobs[i].Request.LocalityWait = "", 0
		}
		seed := seedFor(v.Epoch, sha256.Sum256([]byte(v.Hash())))
		run := func(v View) (Result, int) {
			m := newMatcher(&v, o, &seed)
			starving := 0
			for i := range m.jobs {
				if m.isStarving(&m.jobs[i]) {
					starving++
				}
			}
			m.run()
			return m.res, starving
		}
		r, n := run(v)
		plainR, _ := run(plain)
		got, want := visitOrder(r), visitOrder(plainR)
		if !slices.Equal(got[:n], want[:n]) {
			t.Fatalf("starving tier with locality %v, without %v", got[:n], want[:n])
		}
		for _, w := range r.Waiting {
			if strings.Contains(w.Reason, "holds its data") && slices.Contains(got[:n], w.Job) {
				t.Fatalf("starving job %s waits for locality", w.Job)
			}
		}
	})
}

func TestHoldingsLists(t *testing.T) {
	h := NewHoldings([]Datum{{Root: "bafy-a", Size: 10}, {Root: "bafy-b", Size: 20}})
	if !h.Lists("bafy-a") || !h.Lists("bafy-b") || h.Lists("bafy-c") {
		t.Fatalf("Lists on %+v: a %v, b %v, c %v", h.Roots, h.Lists("bafy-a"), h.Lists("bafy-b"), h.Lists("bafy-c"))
	}
}
