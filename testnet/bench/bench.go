package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

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
)

// Parts lists every part in run order; "micro" in a selection means the
// first three.
func Parts() []string {
	return []string{PartMatch, PartReceipts, PartStaging, PartIdle, PartThroughput, PartRSS}
}

// ErrNeedsRoot is returned when a selected part runs sandboxes and the
// process cannot.
var ErrNeedsRoot = errors.New("the daemon figures run jobs in runc sandboxes: run as root with runc installed (apt-get install -y runc), or select only the micro figures (--only micro)")

// Env is what the daemon parts share.
type Env struct {
	// Dir holds the networks' data dirs and logs.
	Dir string
	Bin cluster.Binaries
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

func (e Env) logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(format, args...)
	}
}

// Options configure Run; zero sizes take the defaults noted.
type Options struct {
	// Only selects parts (see Parts); empty means all.
	Only       []string
	ModuleRoot string
	// Dir is the work dir: binaries, networks, bundles.
	Dir string
	Log func(format string, args ...any)

	IdleNodes, IdleJobs int // 5, 30
	// Throughput defaults to 200 jobs, 10 submitters, 10 nodes, and 20s
	// profiles when ProfileDir is set.
	Throughput ThroughputOptions
	// RSS defaults to 2000 jobs after 200 at a time, 5s idle.
	RSS RSSOptions
	// SandboxRuns is how many bare runc runs make the limit; default 40.
	SandboxRuns int
	Micro       MicroOptions
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
			sel[p] = true
		}
	}
	return sel, nil
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.IdleNodes, 5)
	def(&o.IdleJobs, 30)
	def(&o.Throughput.Nodes, 10)
	def(&o.Throughput.Submitters, 10)
	def(&o.Throughput.Jobs, 200)
	def(&o.RSS.Jobs, 2000)
	def(&o.RSS.ShortJobs, 200)
	def(&o.SandboxRuns, 40)
	def(&o.Micro.StagingMiB, 1024)
	def(&o.Micro.StagingRuns, 3)
	def(&o.Micro.MatchRuns, 10)
	if o.Throughput.ProfileDir != "" && o.Throughput.ProfileFor <= 0 {
		o.Throughput.ProfileFor = 20 * time.Second
	}
	if o.RSS.IdleFor <= 0 {
		o.RSS.IdleFor = 5 * time.Second
	}
	return o
}

// Report is everything a run measured, for --json.
type Report struct {
	Table      Table             `json:"table"`
	Sandbox    *SandboxLimit     `json:"sandbox,omitempty"`
	Idle       *IdleReport       `json:"idle,omitempty"`
	Throughput *ThroughputReport `json:"throughput,omitempty"`
	RSS        *RSSReport        `json:"rss,omitempty"`
}

// Run measures the selected parts one after another (no two networks at
// once, so that one part's load is not another's noise) and returns their
// figures.
func Run(ctx context.Context, o Options) (Report, error) {
	var rep Report
	o = o.withDefaults()
	sel, err := Selected(o.Only)
	if err != nil {
		return rep, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			o.Log(format, args...)
		}
	}
	daemons := sel[PartIdle] || sel[PartThroughput] || sel[PartRSS]
	if daemons {
		if _, err := osexec.LookPath("runc"); os.Geteuid() != 0 || err != nil {
			return rep, ErrNeedsRoot
		}
	}
	load0 := LoadAvg()
	o.Micro.ModuleRoot = o.ModuleRoot
	for _, m := range []struct {
		part    string
		measure func(context.Context, MicroOptions) ([]Figure, error)
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
		bin, err := cluster.Build(ctx, filepath.Join(o.Dir, "bin"))
		if err != nil {
			return rep, err
		}
		env := Env{Dir: o.Dir, Bin: bin, Log: o.Log}
		if sel[PartIdle] || sel[PartThroughput] {
			logf("sandbox: %d bare runc runs of the trivial job's bundle", o.SandboxRuns)
			lim, err := MeasureSandboxLimit(ctx, filepath.Join(o.Dir, "sandbox"), o.SandboxRuns)
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
				rep.Table.Figures = append(rep.Table.Figures, Figure{Group: "profile", Name: "  sandbox start through exec.Runner, CPU per job",
					Value: rep.Sandbox.RunnerCPUMs, Unit: "ms", Measured: fmt.Sprintf("%.1f ms", rep.Sandbox.RunnerCPUMs),
					Baseline: fmt.Sprintf("bare runc run %.1f ms", rep.Sandbox.BareCPUMs), Ratio: ptr(rep.Sandbox.RunnerCPUMs / rep.Sandbox.BareCPUMs)})
			}
			if p := r.Profile; p != nil {
				rep.Table.Notes = append(rep.Table.Notes, fmt.Sprintf("profiles: %s/node*.pb.gz, merged %s/merged.pb.gz; go tool pprof -top:\n%s", p.Dir, p.Dir, topLines(p.Top, 20)))
			}
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
	rep.Table.Machine = fmt.Sprintf("%d cores, %s; load average %s at start, %s at end", runtime.NumCPU(), time.Now().Format("2006-01-02"), load0, LoadAvg())
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

// LoadAvg is the 1, 5 and 15 minute load averages, or "?".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
