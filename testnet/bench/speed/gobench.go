package speed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// ErrNoMetric is returned when a benchmark's output lacks the metric a
// figure is read from: the benchmark was renamed, or stopped reporting it.
var ErrNoMetric = errors.New("metric not reported")

// BenchResult is one result line of `go test -bench`.
type BenchResult struct {
	// Name is the benchmark's name without the -GOMAXPROCS suffix, e.g.
	// "BenchmarkStaging/bulk".
	Name  string
	Procs int
	N     int64
	// Metrics maps a unit ("ns/op", "receipts/s") to its value.
	Metrics map[string]float64
}

// BenchOutput is what one `go test -bench` run printed.
type BenchOutput struct {
	Results []BenchResult
	// Logs are the lines benchmarks logged with b.Log, without the
	// "file.go:NN: " prefix.
	Logs []string
}

// ParseGoBench reads the output of `go test -bench` (the text format, with
// or without -v). Lines it does not know are skipped.
func ParseGoBench(r io.Reader) (BenchOutput, error) {
	var out BenchOutput
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if res, ok := parseResultLine(line); ok {
			out.Results = append(out.Results, res)
			continue
		}
		// b.Log lines are indented and start with "file_test.go:NN: ".
		t := strings.TrimSpace(line)
		if file, rest, ok := strings.Cut(t, ": "); ok && strings.HasSuffix(beforeColon(file), "_test.go") {
			out.Logs = append(out.Logs, rest)
		}
	}
	return out, sc.Err()
}

func beforeColon(s string) string {
	before, _, _ := strings.Cut(s, ":")
	return before
}

// parseResultLine reads "BenchmarkX-2  10  123 ns/op  4.5 jobs/s ...".
func parseResultLine(line string) (BenchResult, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return BenchResult{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n <= 0 {
		return BenchResult{}, false
	}
	res := BenchResult{Name: f[0], Procs: 1, N: n, Metrics: make(map[string]float64)}
	if i := strings.LastIndexByte(f[0], '-'); i > 0 {
		if p, err := strconv.Atoi(f[0][i+1:]); err == nil && p > 0 {
			res.Name, res.Procs = f[0][:i], p
		}
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return BenchResult{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

// Metric finds the value of unit in the first result whose name is name or
// starts with name + "/". A missing one is an ErrNoMetric that says which.
func (o BenchOutput) Metric(name, unit string) (float64, error) {
	found := false
	for _, r := range o.Results {
		if r.Name != name && !strings.HasPrefix(r.Name, name+"/") {
			continue
		}
		found = true
		if v, ok := r.Metrics[unit]; ok {
			return v, nil
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: no result of %s in the output", ErrNoMetric, name)
	}
	return 0, fmt.Errorf("%w: %s reports no %q", ErrNoMetric, name, unit)
}

// GoBench is one `go test -bench` run of a package.
type GoBench struct {
	// Pkg is the package pattern, e.g. "./market".
	Pkg string
	// Bench is the -bench regexp.
	Bench string
	// Benchtime and CPU are passed on when set.
	Benchtime string
	CPU       string
	// Env is added to the environment.
	Env []string
	// Dir is the module root.
	Dir string
}

// Run runs the benchmark and parses what it printed. The output is kept
// in the error when the run fails, since that is where the reason is.
func (g GoBench) Run(ctx context.Context) (BenchOutput, error) {
	// -v prints what benchmarks log (content states its ratio there).
	args := []string{"test", "-v", "-run", "^$", "-bench", g.Bench}
	if g.Benchtime != "" {
		args = append(args, "-benchtime", g.Benchtime)
	}
	if g.CPU != "" {
		args = append(args, "-cpu", g.CPU)
	}
	args = append(args, "-timeout", "30m", g.Pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	cmd.Env = append(cmd.Env, g.Env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return BenchOutput{}, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(buf.String(), 40))
	}
	return ParseGoBench(&buf)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
