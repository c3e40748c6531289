package exec

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestParseSimSpec(t *testing.T) {
	type want struct {
		model string
		mem   uint64
	}
	cases := []struct {
		spec string
		want []want
		err  string // part of the error message; "" for success
	}{
		{spec: "4xH100:80GiB", want: []want{{"H100", 80 << 30}, {"H100", 80 << 30}, {"H100", 80 << 30}, {"H100", 80 << 30}}},
		{spec: "2xA100:40GiB,1xL4:24GiB", want: []want{{"A100", 40 << 30}, {"A100", 40 << 30}, {"L4", 24 << 30}}},
		{spec: " 1x RTX4090 : 24gib , 1xT4:16GB", want: []want{{"RTX4090", 24 << 30}, {"T4", 16e9}}},
		{spec: "1xH200:141GiB", want: []want{{"H200", 141 << 30}}},
		{spec: "1xtiny:512MiB", want: []want{{"tiny", 512 << 20}}},
		{spec: "", err: "empty"},
		{spec: "H100:80GiB", err: "no count"},
		{spec: "0xH100:80GiB", err: `count "0"`},
		{spec: "-1xH100:80GiB", err: `count "-1"`},
		{spec: "4xH100", err: "no memory size"},
		{spec: "4x:80GiB", err: "empty model"},
		{spec: "4xH 100:80GiB", err: `model "H 100"`},
		{spec: "4xH100:80", err: "unknown unit"},
		{spec: "4xH100:GiB", err: "does not start with a number"},
		{spec: "4xH100:80XB", err: "unknown unit"},
		{spec: "4xH100:0GiB", err: "positive"},
		{spec: "4xH100:80GiB,", err: "empty group"},
		{spec: "2xA100:40GiB,,1xL4:24GiB", err: "empty group"},
		{spec: "2000xH100:80GiB", err: "more than 1024"},
		{spec: "1xH100:99999999999999TiB", err: "too large"},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			gpus, err := ParseSimSpec(c.spec, "peer")
			if c.err != "" {
				if !errors.Is(err, ErrSimSpec) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrSimSpec mentioning %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != len(c.want) {
				t.Fatalf("%d GPUs, want %d", len(gpus), len(c.want))
			}
			for i, g := range gpus {
				if g.Index != i || g.Model != c.want[i].model || g.MemoryBytes != c.want[i].mem || !g.Simulated || g.Minor != -1 {
					t.Errorf("GPU %d = %+v, want %+v", i, g, c.want[i])
				}
			}
		})
	}
}

func TestSimUUIDs(t *testing.T) {
	shape := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	a, _ := ParseSimSpec("3xH100:80GiB", "12D3KooWA")
	again, _ := ParseSimSpec("3xH100:80GiB", "12D3KooWA")
	b, _ := ParseSimSpec("3xH100:80GiB", "12D3KooWB")
	seen := map[string]bool{}
	for i := range a {
		if !shape.MatchString(a[i].UUID) {
			t.Errorf("UUID %q is not UUID-shaped", a[i].UUID)
		}
		if a[i].UUID != again[i].UUID {
			t.Errorf("UUID %d changed between parses", i)
		}
		for _, u := range []string{a[i].UUID, b[i].UUID} {
			if seen[u] {
				t.Errorf("UUID %s repeated", u)
			}
			seen[u] = true
		}
	}
	// Pinned, so that a change of derivation (which would rename every
	// simulated GPU on the test network) is deliberate.
	if got, want := simUUID("peer", 0), "GPU-80a8703c-a361-8bda-57c3-a6212a9d299e"; got != want {
		t.Errorf("simUUID(peer, 0) = %s, want %s", got, want)
	}
}
