package market

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Price
		text string
	}{
		{"2.40", 2_400_000, "2.40"},
		{"2.4", 2_400_000, "2.40"},
		{"0.5", 500_000, "0.50"},
		{".5", 500_000, "0.50"},
		{"3", 3 * PriceUnit, "3.00"},
		{"0.125", 125_000, "0.125"},
		{"0.000001", 1, "0.000001"},
		{"1000000", MaxPrice, "1000000.00"},
	} {
		got, err := ParsePrice(tc.in)
		if err != nil || got != tc.want || got.String() != tc.text {
			t.Errorf("ParsePrice(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.text)
		}
	}
	for _, bad := range []string{"", ".", "-1", "1.", "1.0000001", "1e3", "2,40", "1000000.01", "99999999999999999999", " 1"} {
		if p, err := ParsePrice(bad); !errors.Is(err, ErrBadPrice) {
			t.Errorf("ParsePrice(%q) = %d, %v; want ErrBadPrice", bad, p, err)
		}
	}
}

// A price reads from a JSON string or number, and writes as a string.
func TestPriceJSON(t *testing.T) {
	var r Request
	if err := json.Unmarshal([]byte(`{"max_price": 2.5}`), &r); err != nil || r.MaxPrice != 2_500_000 {
		t.Fatalf("number: %d, %v", r.MaxPrice, err)
	}
	if err := json.Unmarshal([]byte(`{"max_price": "1.25"}`), &r); err != nil || r.MaxPrice != 1_250_000 {
		t.Fatalf("string: %d, %v", r.MaxPrice, err)
	}
	if err := json.Unmarshal([]byte(`{"max_price": "-1"}`), &r); !errors.Is(err, ErrBadPrice) {
		t.Fatalf("negative: %v", err)
	}
	b, err := json.Marshal(Offer{Price: 2_400_000})
	if err != nil || !strings.HasSuffix(string(b), `"price":"2.40"}`) {
		t.Fatalf("marshal: %s, %v", b, err)
	}
}

// FuzzParsePrice: whatever the text, a price parsed writes back to text
// that parses to the same price, within bounds.
func FuzzParsePrice(f *testing.F) {
	for _, s := range []string{"2.40", "0", ".5", "1000000", "1.000001", "x", "1e9", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrice(s)
		if err != nil {
			return
		}
		if p.Check() != nil {
			t.Fatalf("%q parsed to %d, out of bounds", s, p)
		}
		if q, err := ParsePrice(p.String()); err != nil || q != p {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, p, p.String(), q, err)
		}
	})
}

// An offer's price and a job's cap are part of the view: two views that
// differ only in either hash apart, as their Matches may differ. A view
// without any hashes as before (TestMatchGolden).
func TestViewHashPrices(t *testing.T) {
	v := View{Now: scenarioStart,
		Offers: []Offer{{Provider: "p", GPUs: []GPU{{UUID: "g", Model: "H100", MemoryBytes: 80 << 30, Free: true}}, CPUs: 8, MemoryBytes: 64 << 30}},
		Jobs:   []Job{{ID: "j", Submitter: "s", Request: Request{GPUs: 1, CPUs: 1, Memory: GiB, Limit: Hour}}}}
	seen := map[string]string{}
	for _, c := range []struct {
		name       string
		price, cap Price
	}{{"none", 0, 0}, {"price 1", PriceUnit, 0}, {"price 2", 2 * PriceUnit, 0}, {"cap 1", 0, PriceUnit}, {"both", PriceUnit, PriceUnit}} {
		v.Offers[0].Price, v.Jobs[0].Request.MaxPrice = c.price, c.cap
		h := v.Hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("%s hashes as %s", c.name, prev)
		}
		seen[h] = c.name
	}
}

func TestPriceList(t *testing.T) {
	l, err := ParsePriceList("H100=2.40, A100=1.20,default=0.80")
	if err != nil {
		t.Fatal(err)
	}
	h100 := GPU{Model: "NVIDIA H100 80GB HBM3"}
	a100 := GPU{Model: "A100-SXM4-40GB"}
	l4 := GPU{Model: "NVIDIA L4"}
	for _, tc := range []struct {
		gpus []GPU
		want Price
	}{
		{[]GPU{h100, h100}, 2_400_000},
		{[]GPU{a100}, 1_200_000},
		{[]GPU{l4}, 800_000},
		{[]GPU{a100, h100}, 2_400_000},
		{nil, 0},
	} {
		if got := l.For(tc.gpus); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.gpus, got, tc.want)
		}
	}
	if got := (PriceList{"H100": PriceUnit}).For([]GPU{l4}); got != 0 {
		t.Errorf("a model not named, no default: %s, want 0", got)
	}
	for _, bad := range []string{"H100", "=1", "H100=x", "H100=1,H100=2", "H100=-1"} {
		if _, err := ParsePriceList(bad); !errors.Is(err, ErrBadPrice) {
			t.Errorf("ParsePriceList(%q): %v, want ErrBadPrice", bad, err)
		}
	}
}
