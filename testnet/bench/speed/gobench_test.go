package speed

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func parseFile(t *testing.T, name string) BenchOutput {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := ParseGoBench(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseLedgerOutput(t *testing.T) {
	out := parseFile(t, "ledger.txt")
	if len(out.Results) != 4 {
		t.Fatalf("%d results, want 4: %+v", len(out.Results), out.Results)
	}
	r := out.Results[0]
	if r.Name != "BenchmarkAppend" || r.Procs != 2 || r.N != 1916 || r.Metrics["receipts/commit"] != 119.8 || r.Metrics["B/op"] != 21959 {
		t.Fatalf("first result %+v", r)
	}
	f, err := receiptFigures(out)
	if err != nil {
		t.Fatal(err)
	}
	if f[0].Value != 1422 || f[1].Value != 1875 {
		t.Fatalf("stored %v, verified %v; want 1422 and 1875", f[0].Value, f[1].Value)
	}
	if f[0].OK == nil || *f[0].OK || f[0].Ratio == nil || *f[0].Ratio != 1422.0/3528 {
		t.Fatalf("stored figure %+v", f[0])
	}
	if f[1].Ratio == nil || *f[1].Ratio != 1875.0/1236 {
		t.Fatalf("verified figure %+v", f[1])
	}
}

func TestParseMatchWithoutProcsSuffix(t *testing.T) {
	f, err := matchFigures(parseFile(t, "match.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if f[0].Value != 589.510881 || *f[0].OK {
		t.Fatalf("match figure %+v", f[0])
	}
}

// The ratio is the benchmark's own summary when it logged one, and the
// sub-benchmarks' rates otherwise; raw-file is not raw.
func TestStagingRatio(t *testing.T) {
	out := parseFile(t, "staging-v.txt")
	f, err := stagingFigures(out, 16)
	if err != nil {
		t.Fatal(err)
	}
	if f[0].Value != 21.27 || *f[0].Ratio != 0.11 || *f[0].OK {
		t.Fatalf("staging figure %+v", f[0])
	}
	out.Logs = nil
	f, err = stagingFigures(out, 16)
	if err != nil {
		t.Fatal(err)
	}
	if want := 21.27 / 190.1; *f[0].Ratio != want {
		t.Fatalf("ratio %v without the summary, want %v", *f[0].Ratio, want)
	}
}

// Repeated runs give the run whose bulk/raw ratio is the median, pairing a
// bulk result with the raw one just before it; a raw result without its
// bulk run is not paired.
func TestStagingMedianOfRuns(t *testing.T) {
	res := func(name string, mibs float64) BenchResult {
		return BenchResult{Name: "BenchmarkStaging/" + name, N: 1, Metrics: map[string]float64{"MiB/s": mibs}}
	}
	out := BenchOutput{Results: []BenchResult{
		res("raw", 1000), res("bulk", 600), // 0.60
		res("raw", 700), res("bulk", 490), // 0.70
		res("raw", 1200),                   // no bulk run after it
		res("raw", 1100), res("bulk", 550), // 0.50
	}}
	if got := stagingPairs(out); len(got) != 3 || got[2] != (stagingPair{raw: 1100, bulk: 550}) {
		t.Fatalf("pairs %v", got)
	}
	f, err := stagingFigures(out, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if *f[0].Ratio != 0.6 || f[0].Value != 600 || !*f[0].OK {
		t.Fatalf("figure %+v, want the median run's ratio 0.6 and its bulk 600 MiB/s", f[0])
	}
	if !strings.Contains(f[0].Measured, "median of 3 runs; ratios 0.50-0.70") || !strings.Contains(f[0].Baseline, "1000 MiB/s") {
		t.Fatalf("figure text %q / %q", f[0].Measured, f[0].Baseline)
	}
}

// A benchmark that stops reporting a unit, or disappears, fails the figure
// by name instead of giving a zero.
func TestMissingMetric(t *testing.T) {
	out := parseFile(t, "ledger.txt")
	for i := range out.Results {
		if out.Results[i].Name == "BenchmarkVerify" {
			delete(out.Results[i].Metrics, "receipts/s")
		}
	}
	_, err := receiptFigures(out)
	if !errors.Is(err, ErrNoMetric) || !strings.Contains(err.Error(), "BenchmarkVerify") || !strings.Contains(err.Error(), "receipts/s") {
		t.Fatalf("err %v, want ErrNoMetric naming BenchmarkVerify and receipts/s", err)
	}
	_, err = matchFigures(parseFile(t, "ledger.txt"))
	if !errors.Is(err, ErrNoMetric) || !strings.Contains(err.Error(), "BenchmarkMatch") {
		t.Fatalf("err %v, want ErrNoMetric naming BenchmarkMatch", err)
	}
	// Only the baselines gone: the figures stay, without a ratio.
	out = parseFile(t, "ledger.txt")
	out.Results = out.Results[:2]
	f, err := receiptFigures(out)
	if err != nil || f[0].Ratio != nil || f[0].Baseline != "" {
		t.Fatalf("without baselines: %+v, %v", f, err)
	}
}

func TestParseResultLineRejects(t *testing.T) {
	for _, line := range []string{
		"BenchmarkStaging",
		"BenchmarkX-2 \t abc \t 12 ns/op",
		"BenchmarkX-2 \t 10 \t 12",
		"BenchmarkX-2 \t 10 \t twelve ns/op",
		"ok  \tgithub.com/e31network/e31/content\t4.788s",
	} {
		if r, ok := parseResultLine(line); ok {
			t.Errorf("%q parsed as %+v", line, r)
		}
	}
}

func FuzzParseGoBench(f *testing.F) {
	for _, name := range []string{"ledger.txt", "match.txt", "staging-v.txt"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ParseGoBench(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range out.Results {
			if !strings.HasPrefix(r.Name, "Benchmark") || r.N <= 0 || r.Procs <= 0 {
				t.Fatalf("bad result %+v", r)
			}
		}
	})
}
