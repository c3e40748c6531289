package market

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want Duration
		str  string
	}{
		{"90s", 90 * Second, "1m30s"},
		{"10m", 10 * Minute, "10m"},
		{"8h", 8 * Hour, "8h"},
		{"1h30m", 90 * Minute, "1h30m"},
		{"500ms", 500, "500ms"},
		{"2d", 2 * Day, "2d"},
		{"36h", 36 * Hour, "1d12h"},
		{"1.5h", 90 * Minute, "1h30m"},
		{".5s", 500, "500ms"},
		{"0.001s", 1, "1ms"},
		{"0", 0, "0s"},
		{"0s", 0, "0s"},
		{"1d2h3m4s5ms", Day + 2*Hour + 3*Minute + 4*Second + 5, "1d2h3m4s5ms"},
		{"9223372036854775807ms", math.MaxInt64, ""},
	}
	for _, c := range good {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, int64(got), err, int64(c.want))
			continue
		}
		if c.str != "" && got.String() != c.str {
			t.Errorf("%q.String() = %q, want %q", c.in, got.String(), c.str)
		}
		back, err := ParseDuration(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q = %v, %v", c.in, got.String(), back, err)
		}
	}
	bad := []string{"", "-1s", "-0", "8", "1", "h", "1x", "1hh", "1.h", "1..5h", "1.5", " 8h", "8h ",
		"0.0001s", "1e3s", "+5s", "9223372036854775808ms", "200000000000d", "99999999999999999999999h", "8H", "1us", "1ns"}
	for _, in := range bad {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		} else if !errors.Is(err, ErrBadDuration) {
			t.Errorf("ParseDuration(%q) error %v is not ErrBadDuration", in, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want Size
		str  string
	}{
		{"40GiB", 40 * GiB, "40GiB"},
		{"8GiB", 8 * GiB, "8GiB"},
		{"512MiB", 512 * MiB, "512MiB"},
		{"1.5GiB", 1536 * MiB, "1536MiB"},
		{"80GB", 80 * GB, "80GB"},
		{"4096", 4096, "4KiB"},
		{"1000B", 1000, "1KB"},
		{"7", 7, "7B"},
		{"0", 0, "0B"},
		{"16 EiB", 0, ""}, // overflow, see bad
		{"1 GiB", GiB, "1GiB"},
		{"15EiB", 15 * EiB, "15EiB"},
		{"18446744073709551615", math.MaxUint64, "18446744073709551615B"},
	}
	for _, c := range good {
		if c.in == "16 EiB" {
			continue
		}
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", c.in, uint64(got), err, uint64(c.want))
			continue
		}
		if got.String() != c.str {
			t.Errorf("%q.String() = %q, want %q", c.in, got.String(), c.str)
		}
		back, err := ParseSize(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q = %v, %v", c.in, got.String(), back, err)
		}
	}
	bad := []string{"", "-1", "-1GiB", "40Gb", "40gib", "40 GiB ", "40GiBs", "GiB", "1.1B", "0.3KiB",
		"16EiB", "18446744073709551616", "1e9", "40  GiB", "4 0GiB", "0x10"}
	for _, in := range bad {
		if s, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", in, s)
		} else if !errors.Is(err, ErrBadSize) {
			t.Errorf("ParseSize(%q) error %v is not ErrBadSize", in, err)
		}
	}
}

func TestUnitsMarshal(t *testing.T) {
	type doc struct {
		D Duration `json:"d" yaml:"d"`
		S Size     `json:"s" yaml:"s"`
	}
	in := doc{D: 8 * Hour, S: 40 * GiB}
	j, err := json.Marshal(in)
	if err != nil || string(j) != `{"d":"8h","s":"40GiB"}` {
		t.Fatalf("json = %s, %v", j, err)
	}
	var out doc
	if err := json.Unmarshal(j, &out); err != nil || out != in {
		t.Fatalf("json round trip = %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"d":"8h","s":1024}`), &out); err != nil || out.S != KiB {
		t.Fatalf("size from a JSON number = %+v, %v", out, err)
	}
	for _, bad := range []string{`{"d":8}`, `{"d":"-8h"}`, `{"s":"1x"}`, `{"s":-1}`, `{"s":1.5}`, `{"s":true}`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("json %s accepted", bad)
		}
	}
	y, err := yaml.Marshal(in)
	if err != nil || string(y) != "d: 8h\ns: 40GiB\n" {
		t.Fatalf("yaml = %q, %v", y, err)
	}
	out = doc{}
	if err := yaml.Unmarshal(y, &out); err != nil || out != in {
		t.Fatalf("yaml round trip = %+v, %v", out, err)
	}
	for _, bad := range []string{"d: [1]", "d: 8", "s: {a: 1}", "s: 1x"} {
		if err := yaml.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("yaml %q accepted", bad)
		}
	}
}

func TestDecay(t *testing.T) {
	const h = int64(Hour)
	cases := []struct {
		prev, elapsed, half, want int64
	}{
		{1000, 0, h, 1000},
		{1000, h, h, 500},
		{1000, 2 * h, h, 250},
		{1 << 40, h / 2, h, 777472127993}, // 2^40 / √2, truncated
		{1000, 1, 0, 0},
		{0, h, h, 0},
		{-5, h, h, 0},
		{math.MaxInt64, 64 * h, h, 0},
		{math.MaxInt64, h, h, math.MaxInt64 >> 1},
	}
	for _, c := range cases {
		if got := Decay(c.prev, c.elapsed, c.half); got != c.want {
			t.Errorf("Decay(%d, %d, %d) = %d, want %d", c.prev, c.elapsed, c.half, got, c.want)
		}
	}
	// Close to the real curve everywhere, and never growing.
	const prev = int64(1) << 50
	last := prev
	for e := int64(0); e <= 3*h; e += h / 97 {
		got := Decay(prev, e, h)
		want := float64(prev) * math.Exp2(-float64(e)/float64(h))
		if math.Abs(float64(got)-want) > want*1e-9+1 {
			t.Errorf("Decay(2^50, %d, 1h) = %d, want about %.0f", e, got, want)
		}
		if got > last {
			t.Errorf("Decay grew at %d", e)
		}
		last = got
	}
	// Decaying in two steps is decaying once, up to truncation.
	a := Decay(Decay(prev, h/3, h), h/3, h)
	b := Decay(prev, 2*h/3, h)
	if d := a - b; d < -4 || d > 4 {
		t.Errorf("two steps %d vs one %d", a, b)
	}
}

func TestExp2Table(t *testing.T) {
	// Recompute 2^(−2^(−i)) in 2.62 fixed point by repeated integer square
	// roots, the way the table was made.
	c := isqrt128(1<<59, 0) // √(2^123) = 2^61.5: √½ in 2.62
	for i := 1; i <= 32; i++ {
		if got := exp2NegPow2(i); got != c {
			t.Errorf("exp2NegPow2(%d) = %#x, want %#x", i, got, c)
		}
		c = isqrt128(c>>2, c<<62)
	}
}

// isqrt128 is ⌊√(hi·2^64 + lo)⌋ by bisection.
func isqrt128(hi, lo uint64) uint64 {
	var r uint64
	for bit := uint64(1) << 63; bit != 0; bit >>= 1 {
		c := r | bit
		h, l := mul64(c, c)
		if h < hi || h == hi && l <= lo {
			r = c
		}
	}
	return r
}

func mul64(a, b uint64) (uint64, uint64) {
	const mask = 1<<32 - 1
	a0, a1 := a&mask, a>>32
	b0, b1 := b&mask, b>>32
	w0 := a0 * b0
	t := a1*b0 + w0>>32
	w1 := t&mask + a0*b1
	return a1*b1 + t>>32 + w1>>32, a * b
}

func TestFormatInstant(t *testing.T) {
	cases := map[int64]string{
		0:                 "1970-01-01T00:00:00Z",
		1_700_000_000_000: "2023-11-14T22:13:20Z",
		1_709_251_200_250: "2024-03-01T00:00:00.250Z",
		951_782_400_000:   "2000-02-29T00:00:00Z",
		-1:                "1969-12-31T23:59:59.999Z",
	}
	for ms, want := range cases {
		if got := FormatInstant(ms); got != want {
			t.Errorf("FormatInstant(%d) = %q, want %q", ms, got, want)
		}
	}
	if !strings.HasSuffix(FormatInstant(math.MaxInt64), "Z") {
		t.Error("FormatInstant(max) has no zone")
	}
}
