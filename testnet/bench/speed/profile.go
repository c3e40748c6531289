package speed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// ProfileReport is the CPU one job cost in each phase, from CPU profiles of
// every daemon taken during the throughput load.
type ProfileReport struct {
	Dir     string  `json:"dir"`
	WindowS float64 `json:"window_s"`
	// Jobs is how many jobs were released inside the profiles' window;
	// every per-job figure divides by it.
	Jobs int `json:"jobs"`
	// Phases are the profiles' samples by phase, per job.
	Phases []PhaseCost `json:"phases_per_job"`
	// ProfiledMs is the profiles' total per job, DaemonMs what the kernel
	// counted for the daemons themselves (the two differ by what the
	// profiler missed), RuncMs the CPU of the daemons' runc children.
	ProfiledMs float64 `json:"profiled_ms_per_job"`
	DaemonMs   float64 `json:"daemon_ms_per_job"`
	RuncMs     float64 `json:"runc_children_ms_per_job"`
	// Top is `go tool pprof -top` of the merged profile.
	Top string `json:"top"`
}

// profiler takes one CPU profile of every daemon of a cluster.
type profiler struct {
	dir   string
	start time.Time
	wg    sync.WaitGroup
	nodes []*nodeProfile
}

// nodeProfile is one daemon's profile and its CPU counters around it.
type nodeProfile struct {
	name, file    string
	before, after bench.ProcCPU
	// ended is when the profile came back: its window's end.
	ended time.Time
	err   error
}

// startProfiles asks every daemon for a CPU profile of d.
func startProfiles(ctx context.Context, c *cluster.Cluster, dir string, d time.Duration) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &profiler{dir: dir, start: time.Now()}
	for _, n := range c.Nodes {
		if n.Metrics == "" {
			return nil, fmt.Errorf("%s serves no metrics address", n.Name)
		}
		np := &nodeProfile{name: n.Name, file: filepath.Join(dir, n.Name+".pb.gz")}
		p.nodes = append(p.nodes, np)
		var err error
		if np.before, err = bench.ReadProcCPU(n.PID); err != nil {
			return nil, err
		}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.Metrics, max(int(d.Seconds()), 1))
		pid := n.PID
		p.wg.Go(func() {
			np.err = fetchTo(ctx, url, np.file, d+30*time.Second)
			np.ended = time.Now()
			if np.err == nil {
				np.after, np.err = bench.ReadProcCPU(pid)
			}
		})
	}
	return p, nil
}

func fetchTo(ctx context.Context, url, path string, limit time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", url, err)
	}
	return f.Close()
}

// finish waits for the profiles, merges them and splits them by phase over
// the jobs of es released while they ran.
func (p *profiler) finish(ctx context.Context, es []bench.Ended) (ProfileReport, error) {
	p.wg.Wait()
	// Only jobs released while every profile ran count: the profiles
	// end when the first of them came back, however long the load went on.
	end := p.nodes[0].ended
	for _, n := range p.nodes[1:] {
		if n.ended.Before(end) {
			end = n.ended
		}
	}
	r := ProfileReport{Dir: p.dir}
	var files []string
	var daemon, runc time.Duration
	for _, n := range p.nodes {
		if n.err != nil {
			return r, fmt.Errorf("profile of %s: %w", n.name, n.err)
		}
		files = append(files, n.file)
		daemon += n.after.Self - n.before.Self
		runc += n.after.Children - n.before.Children
	}
	for _, e := range es {
		if !e.Released.Before(p.start) && !e.Released.After(end) {
			r.Jobs++
		}
	}
	r.WindowS = end.Sub(p.start).Seconds()
	if r.Jobs == 0 {
		return r, fmt.Errorf("no job was released during the %.0fs of profiling", r.WindowS)
	}
	merged := filepath.Join(p.dir, "merged.pb.gz")
	if err := goTool(ctx, merged, append([]string{"pprof", "-proto"}, files...)...); err != nil {
		return r, err
	}
	var top bytes.Buffer
	if err := goToolTo(ctx, &top, "pprof", "-top", "-nodecount", "25", merged); err != nil {
		return r, err
	}
	r.Top = top.String()
	var traces bytes.Buffer
	if err := goToolTo(ctx, &traces, "pprof", "-traces", merged); err != nil {
		return r, err
	}
	samples, err := ParseTraces(&traces)
	if err != nil {
		return r, err
	}
	if len(samples) == 0 {
		return r, fmt.Errorf("the merged profile %s has no samples", merged)
	}
	var total time.Duration
	for _, c := range Attribute(samples) {
		total += c.CPU
		c.CPU /= time.Duration(r.Jobs)
		r.Phases = append(r.Phases, c)
	}
	r.ProfiledMs = bench.Ms(total) / float64(r.Jobs)
	r.DaemonMs = bench.Ms(daemon) / float64(r.Jobs)
	r.RuncMs = bench.Ms(runc) / float64(r.Jobs)
	return r, nil
}

func goTool(ctx context.Context, out string, args ...string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := goToolTo(ctx, f, args...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func goToolTo(ctx context.Context, w io.Writer, args ...string) error {
	var stderr bytes.Buffer
	cmd := osexec.CommandContext(ctx, "go", append([]string{"tool"}, args...)...)
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool %s: %w: %s", strings.Join(args, " "), err, tail(stderr.String(), 10))
	}
	return nil
}

// Figures are the per-job rows, largest phase first, then the sandbox's
// children and the totals against one bare runc run.
func (r ProfileReport) Figures(sandbox *SandboxLimit) []bench.Figure {
	var f []bench.Figure
	for _, c := range r.Phases {
		v := bench.Ms(c.CPU)
		f = append(f, bench.Figure{Group: "profile", Name: "  CPU per job: " + c.Phase, Value: v, Unit: "ms", Measured: fmt.Sprintf("%.2f ms", v)})
	}
	runc := bench.Figure{Group: "profile", Name: "  CPU per job: sandbox (runc children, rusage)", Value: r.RuncMs, Unit: "ms", Measured: fmt.Sprintf("%.2f ms", r.RuncMs)}
	total := r.DaemonMs + r.RuncMs
	all := bench.Figure{Group: "profile", Name: fmt.Sprintf("CPU per job, all daemons + runc (%d jobs in %.0fs)", r.Jobs, r.WindowS), Value: total, Unit: "ms",
		Measured: fmt.Sprintf("%.1f ms (profiled %.1f of daemons' %.1f)", total, r.ProfiledMs, r.DaemonMs)}
	if sandbox != nil && sandbox.BareCPUMs > 0 {
		runc.Baseline = fmt.Sprintf("bare runc run %.1f ms", sandbox.BareCPUMs)
		runc.Ratio = new(r.RuncMs / sandbox.BareCPUMs)
		all.Baseline = runc.Baseline
		all.Ratio = new(total / sandbox.BareCPUMs)
	}
	f = append(f, runc)
	if c := r.sandboxCeiling(sandbox); c != nil {
		f = append(f, *c)
	}
	return append([]bench.Figure{all}, f...)
}

// sandboxCeiling is the most jobs a second the machine could run if the
// daemons spent nothing but what starting and ending sandboxes cost them
// under this load (their profiled sandbox phase and their runc children),
// as a ratio to the bare runc limit: what the throughput ratio can reach
// without a cheaper sandbox, however little the rest costs.
func (r ProfileReport) sandboxCeiling(sandbox *SandboxLimit) *bench.Figure {
	if sandbox == nil || sandbox.JobsPerS <= 0 || r.RuncMs <= 0 {
		return nil
	}
	perJob := r.RuncMs
	for _, c := range r.Phases {
		if c.Phase == PhaseSandbox {
			perJob += bench.Ms(c.CPU)
		}
	}
	jobs := float64(sandbox.Cores) / (perJob / 1000)
	return &bench.Figure{Group: "profile", Name: "  sandbox alone under this load (runc children + e31d's sandbox work)", Value: jobs, Unit: "jobs/s",
		Measured: fmt.Sprintf("at most %.1f jobs/s (%.1f CPU-ms a job)", jobs, perJob),
		Baseline: fmt.Sprintf("limit %.0f jobs/s", sandbox.JobsPerS), Ratio: new(jobs / sandbox.JobsPerS)}
}
