package speed

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// The parts of a run, in the order they run; --only takes a list of them.
const (
	PartMatch      = "match"
	PartReceipts   = "receipts"
	PartStaging    = "staging"
	PartIdle       = "idle"
	PartThroughput = "throughput"
	PartRSS        = "rss"
	// PartArray runs only when named: ten thousand tasks and as many
	// single jobs take the better part of an hour on a small machine.
	PartArray = "array"
	// PartGang: the gang network's TCP and round trips against libp2p's,
	// and a gang's start.
	PartGang = "gang"
)

// Parts lists every part in run order; "micro" in a selection means the
// first three.
func Parts() []string {
	return []string{PartMatch, PartReceipts, PartStaging, PartIdle, PartThroughput, PartRSS, PartArray, PartGang}
}

// Options configure Run; zero sizes take the defaults noted.
type Options struct {
	// Only selects parts (see Parts); empty means all.
	Only []string
	// ModuleRoot is where the package benchmarks run.
	ModuleRoot string

	IdleNodes, IdleJobs int // 5, 30
	// Throughput defaults to 200 jobs, 10 submitters, 10 nodes, and 20s
	// profiles when ProfileDir is set.
	Throughput ThroughputOptions
	// RSS defaults to 2000 jobs after 200 at a time, 5s idle.
	RSS RSSOptions
	// SandboxRuns is how many bare runc runs make the limit; default 40.
	SandboxRuns int
	Micro       MicroOptions
	// Array defaults to 10,000 tasks on 10 nodes, against as many singles.
	Array ArrayOptions
	// Gang defaults to 10 gangs.
	Gang GangOptions
}

// Selected expands and checks a selection: "micro" is match, receipts and
// staging; empty is everything.
func Selected(only []string) (map[string]bool, error) {
	sel := map[string]bool{}
	for _, p := range only {
		switch p = strings.TrimSpace(p); {
		case p == "micro":
			sel[PartMatch], sel[PartReceipts], sel[PartStaging] = true, true, true
		case slices.Contains(Parts(), p):
			sel[p] = true
		case p == "":
		default:
			return nil, fmt.Errorf("unknown part %q; parts are micro, %s", p, strings.Join(Parts(), ", "))
		}
	}
	if len(sel) == 0 {
		for _, p := range Parts() {
			sel[p] = p != PartArray
		}
	}
	return sel, nil
}

func (o Options) withDefaults() Options {
	bench.Default(&o.IdleNodes, 5)
	bench.Default(&o.IdleJobs, 30)
	bench.Default(&o.Throughput.Nodes, 10)
	bench.Default(&o.Throughput.Submitters, 10)
	bench.Default(&o.Throughput.Jobs, 200)
	bench.Default(&o.RSS.Jobs, 2000)
	bench.Default(&o.RSS.ShortJobs, 200)
	bench.Default(&o.SandboxRuns, 40)
	bench.Default(&o.Array.Nodes, 10)
	bench.Default(&o.Array.Tasks, 10_000)
	bench.Default(&o.Micro.StagingMiB, 1024)
	bench.Default(&o.Micro.StagingRuns, 3)
	bench.Default(&o.Micro.MatchRuns, 10)
	if o.Throughput.ProfileDir != "" && o.Throughput.ProfileFor <= 0 {
		o.Throughput.ProfileFor = 20 * time.Second
	}
	bench.Default(&o.RSS.IdleFor, 5*time.Second)
	return o
}

// Report is everything a run measured, for --json.
type Report struct {
	Table      bench.Table       `json:"table"`
	Sandbox    *SandboxLimit     `json:"sandbox,omitempty"`
	Idle       *IdleReport       `json:"idle,omitempty"`
	Throughput *ThroughputReport `json:"throughput,omitempty"`
	RSS        *RSSReport        `json:"rss,omitempty"`
	Array      *ArrayReport      `json:"array,omitempty"`
	Gang       *GangReport       `json:"gang,omitempty"`
}

// Run measures the selected parts one after another (no two networks at
// once, so that one part's load is not another's noise) and returns their
// figures. The daemon parts build e31d and e31 into dir/bin and keep their
// networks and bundles in dir; log, if not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	var rep Report
	o = o.withDefaults()
	sel, err := Selected(o.Only)
	if err != nil {
		return rep, err
	}
	logf := bench.Env{Log: log}.Logf
	daemons := sel[PartIdle] || sel[PartThroughput] || sel[PartRSS] || sel[PartArray] || sel[PartGang]
	if daemons {
		if _, err := osexec.LookPath("runc"); os.Geteuid() != 0 || err != nil {
			return rep, bench.ErrNeedsRoot
		}
	}
	load0 := bench.LoadAvg()
	o.Micro.ModuleRoot = o.ModuleRoot
	for _, m := range []struct {
		part    string
		measure func(context.Context, MicroOptions) ([]bench.Figure, error)
	}{{PartMatch, MeasureMatch}, {PartReceipts, MeasureReceipts}, {PartStaging, MeasureStaging}} {
		if !sel[m.part] {
			continue
		}
		logf("%s: running the package benchmark", m.part)
		f, err := m.measure(ctx, o.Micro)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", m.part, err)
		}
		rep.Table.Figures = append(rep.Table.Figures, f...)
	}

	if daemons {
		logf("building e31d and e31")
		bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
		if err != nil {
			return rep, err
		}
		env := bench.Env{Dir: dir, Bin: bin, Log: log}
		if sel[PartIdle] || sel[PartThroughput] {
			logf("sandbox: %d bare runc runs of the trivial job's bundle", o.SandboxRuns)
			lim, err := MeasureSandboxLimit(ctx, filepath.Join(dir, "sandbox"), o.SandboxRuns)
			if err != nil {
				return rep, fmt.Errorf("sandbox limit: %w", err)
			}
			rep.Sandbox = &lim
			logf("sandbox: %.1f CPU-ms per bare run, %.1f through exec.Runner; limit %.0f jobs/s on %d cores", lim.BareCPUMs, lim.RunnerCPUMs, lim.JobsPerS, lim.Cores)
		}
		if sel[PartIdle] {
			r, err := MeasureIdle(ctx, env, o.IdleNodes, o.IdleJobs)
			if err != nil {
				return rep, fmt.Errorf("idle: %w", err)
			}
			rep.Idle = &r
			rep.Table.Figures = append(rep.Table.Figures, r.Figures(rep.Sandbox)...)
		}
		if sel[PartThroughput] {
			r, err := MeasureThroughput(ctx, env, o.Throughput)
			if err != nil {
				return rep, fmt.Errorf("throughput: %w", err)
			}
			rep.Throughput = &r
			rep.Table.Figures = append(rep.Table.Figures, r.Figures(rep.Sandbox)...)
			if rep.Sandbox != nil {
				rep.Table.Figures = append(rep.Table.Figures, bench.Figure{Group: "profile", Name: "  sandbox start through exec.Runner, CPU per job",
					Value: rep.Sandbox.RunnerCPUMs, Unit: "ms", Measured: fmt.Sprintf("%.1f ms", rep.Sandbox.RunnerCPUMs),
					Baseline: fmt.Sprintf("bare runc run %.1f ms", rep.Sandbox.BareCPUMs), Ratio: new(rep.Sandbox.RunnerCPUMs / rep.Sandbox.BareCPUMs)})
			}
			if p := r.Profile; p != nil {
				rep.Table.Notes = append(rep.Table.Notes, fmt.Sprintf("profiles: %s/node*.pb.gz, merged %s/merged.pb.gz; go tool pprof -top:\n%s", p.Dir, p.Dir, topLines(p.Top, 20)))
			}
		}
		if sel[PartGang] {
			o.Gang.ModuleRoot = o.ModuleRoot
			r, err := MeasureGang(ctx, env, o.Gang)
			if err != nil {
				return rep, fmt.Errorf("gang: %w", err)
			}
			rep.Gang = &r
			rep.Table.Figures = append(rep.Table.Figures, r.Figures()...)
		}
		if sel[PartArray] {
			r, err := MeasureArray(ctx, env, o.Array)
			if err != nil {
				return rep, fmt.Errorf("array: %w", err)
			}
			rep.Array = &r
			rep.Table.Figures = append(rep.Table.Figures, r.Figures()...)
		}
		if sel[PartRSS] {
			r, err := MeasureRSS(ctx, env, o.RSS)
			if err != nil {
				return rep, fmt.Errorf("rss: %w", err)
			}
			rep.RSS = &r
			rep.Table.Figures = append(rep.Table.Figures, r.Figures()...)
		}
	}
	rep.Table.Machine = fmt.Sprintf("%d cores, %s; load average %s at start, %s at end", runtime.NumCPU(), time.Now().Format("2006-01-02"), load0, bench.LoadAvg())
	return rep, nil
}

// topLines keeps pprof's -top from its column header on, n lines of it;
// the header above (build ID, time) says nothing about the figures.
func topLines(top string, n int) string {
	lines := strings.Split(strings.TrimRight(top, "\n"), "\n")
	for i, l := range lines {
		if strings.Contains(l, "flat%") {
			lines = lines[i:]
			break
		}
	}
	return strings.Join(lines[:min(len(lines), n)], "\n")
}
