package speed

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/e31network/e31/testnet/bench"
)

// Goals of the micro figures (issue 12).
const (
	goalMatchMs        = 100
	goalStoredPerS     = 10_000
	goalVerifiedPerS   = 20_000
	goalStagingOverRaw = 0.6
)

// MicroOptions sizes the package benchmarks.
type MicroOptions struct {
	// ModuleRoot is where `go test` runs.
	ModuleRoot string
	// StagingMiB is the size staged by content's benchmark.
	StagingMiB int
	// StagingRuns is how many times the raw stream and the bulk path
	// are each measured, one after the other.
	StagingRuns int
	// MatchRuns is the -benchtime of Match, in passes.
	MatchRuns int
}

// MeasureMatch runs market's Match benchmark on one core and reports a
// pass's time.
func MeasureMatch(ctx context.Context, o MicroOptions) ([]bench.Figure, error) {
	out, err := GoBench{Pkg: "./market", Bench: "^BenchmarkMatch$", Benchtime: fmt.Sprintf("%dx", max(o.MatchRuns, 1)), CPU: "1", Dir: o.ModuleRoot}.Run(ctx)
	if err != nil {
		return nil, err
	}
	return matchFigures(out)
}

func matchFigures(out BenchOutput) ([]bench.Figure, error) {
	ns, err := out.Metric("BenchmarkMatch", "ns/op")
	if err != nil {
		return nil, err
	}
	passMs := ns / 1e6
	return []bench.Figure{{
		Group: "micro", Name: "Match, 10k providers x 100k jobs, one core",
		Value: passMs, Unit: "ms", Measured: fmt.Sprintf("%.0f ms/pass", passMs),
		Goal: fmt.Sprintf("<= %d ms", goalMatchMs), OK: new(passMs <= goalMatchMs),
	}}, nil
}

// MeasureReceipts runs ledger's benchmarks on two cores: receipts signed
// and stored durably, and verified, each beside the Ed25519 work alone on
// one goroutine.
func MeasureReceipts(ctx context.Context, o MicroOptions) ([]bench.Figure, error) {
	out, err := GoBench{Pkg: "./ledger", Bench: "^Benchmark(Append|Verify|ReceiptSign|ReceiptVerify)$", CPU: "2", Dir: o.ModuleRoot}.Run(ctx)
	if err != nil {
		return nil, err
	}
	return receiptFigures(out)
}

func receiptFigures(out BenchOutput) ([]bench.Figure, error) {
	stored, err := out.Metric("BenchmarkAppend", "receipts/s")
	if err != nil {
		return nil, err
	}
	verified, err := out.Metric("BenchmarkVerify", "receipts/s")
	if err != nil {
		return nil, err
	}
	f := []bench.Figure{
		{Group: "micro", Name: "receipts signed + stored durably, 2 cores", Value: stored, Unit: "receipts/s",
			Measured: fmt.Sprintf("%.0f/s", stored), Goal: fmt.Sprintf(">= %d/s", goalStoredPerS), OK: new(stored >= goalStoredPerS)},
		{Group: "micro", Name: "receipts verified (ledger walk), 2 cores", Value: verified, Unit: "receipts/s",
			Measured: fmt.Sprintf("%.0f/s", verified), Goal: fmt.Sprintf(">= %d/s", goalVerifiedPerS), OK: new(verified >= goalVerifiedPerS)},
	}
	// The Ed25519 work alone is the floor under both; a benchmark that is
	// gone only takes the baseline away.
	if sign, err := out.Metric("BenchmarkReceiptSign", "receipts/s"); err == nil && sign > 0 {
		f[0].Baseline = fmt.Sprintf("%.0f/s signing alone, 1 goroutine", sign)
		f[0].Ratio = new(stored / sign)
	}
	if ver, err := out.Metric("BenchmarkReceiptVerify", "receipts/s"); err == nil && ver > 0 {
		f[1].Baseline = fmt.Sprintf("%.0f/s signatures alone, 1 goroutine", ver)
		f[1].Ratio = new(verified / ver)
	}
	return f, nil
}

// MeasureStaging runs content's staging benchmark o.StagingRuns times at
// o.StagingMiB, each run measuring the raw stream then the bulk path, and
// reports the bulk path against a raw libp2p stream to /dev/null: the run
// whose ratio is the median. Each ratio is of two transfers a few seconds
// apart, so a spell of load on a shared machine weighs on one run's ratio,
// not on the figure.
func MeasureStaging(ctx context.Context, o MicroOptions) ([]bench.Figure, error) {
	var all BenchOutput
	for range max(o.StagingRuns, 1) {
		out, err := GoBench{Pkg: "./content", Bench: "^BenchmarkStaging$/^(raw|bulk)$", Benchtime: "1x",
			Dir: o.ModuleRoot, Env: []string{"E31_BENCH_MIB=" + strconv.Itoa(o.StagingMiB)}}.Run(ctx)
		if err != nil {
			return nil, err
		}
		all.Results = append(all.Results, out.Results...)
		all.Logs = append(all.Logs, out.Logs...)
	}
	return stagingFigures(all, o.StagingMiB)
}

// stagingPair is one run of the raw stream and the bulk path after it.
type stagingPair struct{ raw, bulk float64 }

// stagingPairs pairs each bulk result with the raw result before it.
func stagingPairs(out BenchOutput) []stagingPair {
	var pairs []stagingPair
	raw := 0.0
	for _, r := range out.Results {
		switch r.Name {
		case "BenchmarkStaging/raw":
			raw = r.Metrics["MiB/s"]
		case "BenchmarkStaging/bulk":
			if b := r.Metrics["MiB/s"]; raw > 0 && b > 0 {
				pairs = append(pairs, stagingPair{raw: raw, bulk: b})
			}
			raw = 0
		}
	}
	return pairs
}

var bulkOverRaw = regexp.MustCompile(`bulk/raw ([0-9]+(?:\.[0-9]+)?)\b`)

func stagingFigures(out BenchOutput, mib int) ([]bench.Figure, error) {
	name := fmt.Sprintf("bulk staging of %d MiB into the store", mib)
	goal := fmt.Sprintf(">= %.1fx raw", goalStagingOverRaw)
	if pairs := stagingPairs(out); len(pairs) > 1 {
		// The figure is the run whose ratio is the median (the upper one
		// of an even count), so that its rate, baseline and ratio agree.
		slices.SortFunc(pairs, func(a, b stagingPair) int { return cmp.Compare(a.bulk/a.raw, b.bulk/b.raw) })
		mid := pairs[len(pairs)/2]
		lo, hi := pairs[0], pairs[len(pairs)-1]
		ratio := mid.bulk / mid.raw
		return []bench.Figure{{
			Group: "micro", Name: name, Value: mid.bulk, Unit: "MiB/s",
			Measured: fmt.Sprintf("%.0f MiB/s (median of %d runs; ratios %.2f-%.2f)", mid.bulk, len(pairs), lo.bulk/lo.raw, hi.bulk/hi.raw),
			Baseline: fmt.Sprintf("%.0f MiB/s raw libp2p stream to /dev/null, same run", mid.raw), Ratio: new(ratio),
			Goal: goal, OK: new(ratio >= goalStagingOverRaw),
		}}, nil
	}
	bulk, err := out.Metric("BenchmarkStaging/bulk", "MiB/s")
	if err != nil {
		return nil, err
	}
	raw, err := out.Metric("BenchmarkStaging/raw", "MiB/s")
	if err != nil {
		return nil, err
	}
	if raw <= 0 {
		return nil, fmt.Errorf("%w: BenchmarkStaging/raw reports %v MiB/s", ErrNoMetric, raw)
	}
	// The benchmark's own summary states the ratio it computed from
	// unrounded rates; the reported metrics are the fallback.
	ratio := bulk / raw
	for _, l := range out.Logs {
		if m := bulkOverRaw.FindStringSubmatch(l); m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil {
				ratio = v
			}
		}
	}
	return []bench.Figure{{
		Group: "micro", Name: name,
		Value: bulk, Unit: "MiB/s", Measured: fmt.Sprintf("%.0f MiB/s", bulk),
		Baseline: fmt.Sprintf("%.0f MiB/s raw libp2p stream to /dev/null", raw), Ratio: new(ratio),
		Goal: goal, OK: new(ratio >= goalStagingOverRaw),
	}}, nil
}
