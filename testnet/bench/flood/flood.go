package flood

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/bench"
	flooder "github.com/e31network/e31/testnet/byzantine/flood"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
)

// Options configure Measure; zero values take the defaults noted.
type Options struct {
	// Nodes is the number of honest daemons, each a provider; default 4.
	Nodes int
	// GPUs per node; default 2.
	GPUs int
	// Jobs is the number of honest jobs submitted in each phase; default 8.
	Jobs int
	// Window is the least length of each phase; default 20s. A phase lasts
	// until its jobs have ended, if that is later.
	Window time.Duration
	// SybilRate is the Sybil flooder's rate, declarations a second from
	// fresh identities; default 400.
	SybilRate float64
	// MixedRate is the mixed flooder's rate: Sybil, invalid and oversized
	// messages in turn; default 100.
	MixedRate float64
	// JobLimit bounds how long a phase waits for its jobs; default 3m.
	JobLimit time.Duration
}

func (o Options) withDefaults() Options {
	bench.Default(&o.Nodes, 4)
	bench.Default(&o.GPUs, 2)
	bench.Default(&o.Jobs, 8)
	bench.Default(&o.Window, 20*time.Second)
	bench.Default(&o.SybilRate, 400)
	bench.Default(&o.MixedRate, 100)
	bench.Default(&o.JobLimit, 3*time.Minute)
	return o
}

// Phase is one phase's honest jobs and the daemons' CPU over it.
type Phase struct {
	Submitted int     `json:"submitted"`
	Completed int     `json:"completed"`
	WallS     float64 `json:"wall_s"`
	// Job is submit to release of the honest jobs, in ms.
	Job bench.Spread `json:"job_ms"`
	// DaemonCPUMs is the CPU time all honest daemons spent in the phase
	// (utime + stime from /proc/PID/stat, runc children apart).
	DaemonCPUMs float64 `json:"daemon_cpu_ms"`
}

// Report is what Measure measured.
type Report struct {
	Nodes int   `json:"nodes"`
	Quiet Phase `json:"quiet"`
	Flood Phase `json:"flood"`
	// ExtraJobMs is how much longer the median honest job took under the
	// flood than in the quiet phase.
	ExtraJobMs float64 `json:"extra_job_ms"`
	// ExtraCPUMs is the CPU the honest daemons spent on the flood: the
	// flood phase's daemon CPU less the quiet phase's, scaled to the same
	// length.
	ExtraCPUMs float64 `json:"extra_cpu_ms"`
	// Sybil flooder: declarations from fresh identities, all valid.
	SybilSent     int `json:"sybil_sent"`
	SybilAccepted int `json:"sybil_accepted"`
	// Mixed flooder: valid declarations between invalid and oversized
	// messages. MixedAccepted counts its valid ones that spread, which can
	// only happen before it is graylisted.
	MixedSent     flooder.Sent `json:"mixed_sent"`
	MixedAccepted int          `json:"mixed_accepted"`
	// Graylisting is how many daemons had a peer below the graylist
	// threshold at the end of the flood (the mixed flooder), of Nodes.
	Graylisting int `json:"graylisting_daemons"`
	// Bands counts the daemons' gossip peers by score band at the end of
	// the flood, summed over daemons.
	Bands map[string]float64 `json:"bands"`
	// Limited is the messages the daemons' per-peer limits dropped,
	// Rejected those their validators refused, by reason, summed.
	Limited  map[string]float64 `json:"limited"`
	Rejected map[string]float64 `json:"rejected"`
}

// Run builds e31d and e31 into dir/bin and runs Measure on them, in dir;
// log, if not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	return bench.BuildAndMeasure(ctx, dir, log, o, Measure)
}

// Measure runs honest jobs on a network of daemons twice, once quiet
// and once while two flooding peers (testnet/byzantine/flood) run: one sending valid
// declarations from fresh identities, one mixing those with invalid and
// oversized messages. An observer that connects only to the daemons counts
// which flood messages spread. Honest jobs that do not complete are an
// error.
func Measure(ctx context.Context, e bench.Env, o Options) (Report, error) {
	o = o.withDefaults()
	r := Report{Nodes: o.Nodes, Limited: make(map[string]float64), Bands: make(map[string]float64), Rejected: make(map[string]float64)}
	const network = "flood"
	c, err := bench.StartNetwork(ctx, cluster.Options{N: o.Nodes, GPUs: o.GPUs, Dir: filepath.Join(e.Dir, "flood"), Bin: e.Bin, Heartbeat: time.Second, Network: network, Metrics: true})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	addrs := c.Addrs()
	obs, err := startObserver(ctx, network, addrs)
	if err != nil {
		return r, err
	}
	defer obs.close()

	e.Logf("flood: quiet phase, %d jobs on %d daemons", o.Jobs, o.Nodes)
	if r.Quiet, err = floodPhase(ctx, c, o, nil); err != nil {
		return r, fmt.Errorf("quiet phase: %w", err)
	}
	if err := bench.WaitIdle(ctx, c, time.Minute); err != nil {
		return r, err
	}

	sybil, err := startFlooder(ctx, network, "sybil", addrs)
	if err != nil {
		return r, err
	}
	defer sybil.Close()
	mixed, err := startFlooder(ctx, network, "mixed", addrs)
	if err != nil {
		return r, err
	}
	defer mixed.Close()
	fctx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sybilSent, mixedSent flooder.Sent
	var sybilErr, mixedErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		sybilSent, sybilErr = sybil.Run(fctx, []flooder.Kind{flooder.Sybil}, o.SybilRate, 0)
	}()
	go func() {
		defer wg.Done()
		mixedSent, mixedErr = mixed.Run(fctx, []flooder.Kind{flooder.Sybil, flooder.Invalid, flooder.Oversized}, o.MixedRate, 0)
	}()
	e.Logf("flood: flood phase, %d jobs, Sybil flood at %.0f/s, mixed flood at %.0f/s", o.Jobs, o.SybilRate, o.MixedRate)
	r.Flood, err = floodPhase(ctx, c, o, func() { stopFlood() })
	stopFlood()
	wg.Wait()
	if err != nil {
		return r, fmt.Errorf("flood phase: %w", err)
	}
	if sybilErr != nil || mixedErr != nil {
		return r, fmt.Errorf("flooders: %v; %v", sybilErr, mixedErr)
	}
	r.SybilSent, r.MixedSent = sybilSent.Total(), mixedSent
	r.SybilAccepted, r.MixedAccepted = obs.count("sybil-"), obs.count("mixed-")
	for _, n := range c.Nodes {
		m, err := bench.Scrape(ctx, n.Metrics)
		if err != nil {
			return r, err
		}
		if m[`e31_gossip_peers{band="graylist"}`] > 0 {
			r.Graylisting++
		}
		for k, v := range m {
			switch {
			case strings.HasPrefix(k, "e31_gossip_peers{"):
				r.Bands[bench.LabelOf(k, "band")] += v
			case strings.HasPrefix(k, "e31_gossip_limited_total{"):
				r.Limited[bench.LabelOf(k, "reason")] += v
			case strings.HasPrefix(k, "e31_gossip_rejected_total{"):
				r.Rejected[bench.LabelOf(k, "reason")] += v
			}
		}
	}
	r.ExtraJobMs = r.Flood.Job.P50 - r.Quiet.Job.P50
	if r.Quiet.WallS > 0 {
		r.ExtraCPUMs = r.Flood.DaemonCPUMs - r.Quiet.DaemonCPUMs*r.Flood.WallS/r.Quiet.WallS
	}
	return r, nil
}

// floodPhase submits the honest jobs round-robin, waits for them and for
// the window, and measures the daemons' CPU over it. ended, if set, is
// called when the phase's measurement ends.
func floodPhase(ctx context.Context, c *cluster.Cluster, o Options, ended func()) (Phase, error) {
	var p Phase
	start := time.Now()
	cpu0, err := daemonsCPU(c)
	if err != nil {
		return p, err
	}
	ws, submitted, err := submitHonest(ctx, c, o.Jobs)
	p.Submitted = submitted
	if err != nil {
		return p, err
	}
	es, err := bench.WaitAll(ctx, ws, 100*time.Millisecond, o.JobLimit)
	if err != nil {
		for _, s := range pending(ctx, ws) {
			err = fmt.Errorf("%w; %s", err, s)
		}
		return p, err
	}
	if left := time.Until(start.Add(o.Window)); left > 0 {
		if err := task.Sleep(ctx, left); err != nil {
			return p, err
		}
	}
	cpu1, err := daemonsCPU(c)
	if ended != nil {
		ended()
	}
	if err != nil {
		return p, err
	}
	p.WallS = time.Since(start).Seconds()
	p.DaemonCPUMs = bench.Ms(cpu1 - cpu0)
	var why []string
	p.Completed, p.Job, why = tally(es)
	if len(why) > 0 {
		return p, fmt.Errorf("%d of %d honest jobs did not complete: %s", len(why), p.Submitted, strings.Join(why, "; "))
	}
	return p, nil
}

// daemonsCPU is the CPU the daemons of c have used so far, children apart.
func daemonsCPU(c *cluster.Cluster) (time.Duration, error) {
	var sum time.Duration
	for _, n := range c.Nodes {
		t, err := bench.ReadProcCPU(n.PID)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", n.Name, err)
		}
		sum += t.Self
	}
	return sum, nil
}

func startFlooder(ctx context.Context, network, label string, addrs []string) (*flooder.Peer, error) {
	f, err := flooder.New(ctx, flooder.Config{Network: network, Label: label})
	if err != nil {
		return nil, err
	}
	if err := f.Connect(ctx, addrs...); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// observer is an honest gossip peer that only listens: every flood
// declaration it receives was accepted and forwarded by some daemon.
type observer struct {
	h      host.Host
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex     // guards names
	names map[string]int // declaration name prefix (up to the first '-') -> count
}

func startObserver(ctx context.Context, network string, addrs []string) (*observer, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	o := &observer{h: h, cancel: cancel, done: make(chan struct{}), names: make(map[string]int)}
	g, err := p2p.NewGossip(octx, h, key, p2p.GossipConfig{
		Network: network, Log: slog.New(slog.DiscardHandler),
		// No limits: the observer must count every message the daemons
		// pass on, not the share its own limits would let through.
		Guard:      p2p.NewGuard(p2p.GuardConfig{Limits: map[string]p2p.Rate{}}),
		Validators: map[string]p2p.BodyValidator{p2p.TopicJobs: wire.ValidateJobMessage, p2p.TopicOffers: wire.ValidateOffer},
	})
	if err != nil {
		o.close()
		return nil, err
	}
	sub, err := g.Subscribe(p2p.TopicJobs)
	if err != nil {
		o.close()
		return nil, err
	}
	if err := p2p.Dial(ctx, h, addrs...); err != nil {
		o.close()
		return nil, fmt.Errorf("observer: %w", err)
	}
	go func() {
		defer close(o.done)
		defer sub.Cancel()
		for {
			s, err := sub.Next(octx)
			if err != nil {
				return
			}
			if s.Message.Kind != wire.KindDeclaration {
				continue
			}
			var b wire.DeclarationBody
			if s.Decode(&b) != nil {
				continue
			}
			name := b.Declaration.Name
			if i := strings.IndexByte(name, '-'); i > 0 {
				o.mu.Lock()
				o.names[name[:i+1]]++
				o.mu.Unlock()
			}
		}
	}()
	return o, nil
}

// count is how many declarations whose name starts with prefix arrived.
func (o *observer) count(prefix string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.names[prefix]
}

func (o *observer) close() {
	o.cancel()
	o.h.Close()
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	byReason := func(m map[string]float64) string {
		var reasons, out []string
		for k, v := range m {
			if v > 0 {
				reasons = append(reasons, k)
			}
		}
		slices.Sort(reasons)
		for _, k := range reasons {
			out = append(out, fmt.Sprintf("%s %.0f", k, m[k]))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, ", ")
	}
	_, err := fmt.Fprintf(w, `flood-bench: %d honest daemons
  honest jobs, quiet:  %d/%d completed, median %.0f ms, max %.0f ms; daemons' CPU %.0f ms over %.1f s
  honest jobs, flood:  %d/%d completed, median %.0f ms, max %.0f ms; daemons' CPU %.0f ms over %.1f s
  extra time per honest job (median): %+.0f ms
  CPU the honest daemons spent on the flood: %.0f ms (%.1f%% of one core over the flood)
  Sybil flooder: %d valid declarations from fresh identities sent, %d spread (the rest dropped by per-peer limits)
  mixed flooder: %d sent (%v), %d of its valid ones spread before it was graylisted; graylisted by %d of %d daemons
  the daemons' per-peer limits dropped: %s; their validators rejected: %s
  the daemons' gossip peers by score band at the end: %s
`, r.Nodes,
		r.Quiet.Completed, r.Quiet.Submitted, r.Quiet.Job.P50, r.Quiet.Job.Max, r.Quiet.DaemonCPUMs, r.Quiet.WallS,
		r.Flood.Completed, r.Flood.Submitted, r.Flood.Job.P50, r.Flood.Job.Max, r.Flood.DaemonCPUMs, r.Flood.WallS,
		r.ExtraJobMs, r.ExtraCPUMs, 100*r.ExtraCPUMs/1000/max(r.Flood.WallS, 1e-9),
		r.SybilSent, r.SybilAccepted,
		r.MixedSent.Total(), map[flooder.Kind]int(r.MixedSent), r.MixedAccepted, r.Graylisting, r.Nodes,
		byReason(r.Limited), byReason(r.Rejected), byReason(r.Bands))
	return err
}
