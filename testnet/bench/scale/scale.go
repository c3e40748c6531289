package scale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Options sizes the simulated network.
type Options struct {
	// Providers and JobsPerS are the whole network's size.
	Providers int
	JobsPerS  float64
	// Shards is how many shards the network's market is split into (e31d
	// --shards); the daemon is in one, and hears its share of the network:
	// Providers/Shards providers and JobsPerS/Shards jobs a second. 0:
	// p2p.SuggestShards(Providers), as the network would be run.
	Shards int
	// Neighbours is how many gossip peers carry the network to the daemon:
	// each unique message arrives once from each. Default 6 (gossipsub's D).
	Neighbours int
	// Window is how long the daemon's costs are measured, after a warm-up
	// of one heartbeat and the queue wait. Default 60s.
	Window time.Duration
	// Heartbeat is every provider's offer interval, the daemon's included.
	// Default 10s, e31d's.
	Heartbeat time.Duration
	// QueueWait is how long each job stays open before it is leased.
	// Default 30s, the model's.
	QueueWait time.Duration
	// Run is how long each lease holds its GPUs before it is released.
	// Default 60s; negative: no job is leased, each is withdrawn instead.
	Run time.Duration
	// Submitters is how many submitters take turns to declare the jobs.
	// Default 100.
	Submitters int
	// Departure measures how long the daemon keeps a provider that went
	// silent (at most DepartureLimit); off when zero.
	DepartureLimit time.Duration
	// ProbeEvery is how often, over the window, the daemon submits a job
	// of its own that only a second real daemon in its shard, a provider,
	// can take: the jobs whose rounds lost are counted. Default 2s;
	// negative: no second daemon, rounds lost not measured.
	ProbeEvery time.Duration
	// Classes splits the network by resource class instead (e31d --market
	// classes; classmeasure.go): a far network of the mix, every
	// class in subshards, and a digest per subshard a minute. Shards,
	// ProbeEvery and DepartureLimit do not apply.
	Classes bool
	// Role is what the daemon is in a class network: RoleProvider (default)
	// or RoleSubmitter.
	Role string
	// OpenJobs is how many jobs a submitter daemon keeps open. Default 1.
	OpenJobs int
}

func (o Options) withDefaults() Options {
	o.Neighbours = cmp.Or(o.Neighbours, 6)
	o.Window = cmp.Or(o.Window, time.Minute)
	o.Heartbeat = cmp.Or(o.Heartbeat, 10*time.Second)
	o.Submitters = cmp.Or(o.Submitters, 100)
	o.QueueWait = cmp.Or(o.QueueWait, 30*time.Second)
	o.Run = cmp.Or(o.Run, time.Minute)
	o.ProbeEvery = cmp.Or(o.ProbeEvery, 2*time.Second)
	o.Role = cmp.Or(o.Role, RoleProvider)
	o.OpenJobs = cmp.Or(o.OpenJobs, 1)
	return o
}

// Measured is what the real daemon paid over the window.
type Measured struct {
	BytesInPerS  float64 `json:"peer_bytes_in_per_s"`
	BytesOutPerS float64 `json:"peer_bytes_out_per_s"`
	CPUCores     float64 `json:"peer_cpu_cores"`
	RSSBytes     float64 `json:"peer_rss_bytes"`
	// MatchMs and CutMs are the median of the daemon's epoch passes in
	// the window (GET /v1/matches); MatchP99Ms their slowest but 1%.
	MatchMs    float64 `json:"match_ms"`
	MatchP99Ms float64 `json:"match_p99_ms"`
	CutMs      float64 `json:"cut_ms"`
	Passes     int     `json:"passes"`
	// DepartureS is how long the daemon kept offering a provider that
	// went silent in its view; -1 when not measured or not seen to leave.
	DepartureS float64 `json:"departure_detect_s"`
	// RoundsLostPer100 is the daemon's rounds lost (its
	// e31_match_rounds_lost_total) per 100 of its probe jobs leased;
	// ProbeJobs those jobs, ProbeRentMs their median submit -> signed
	// lease. -1: not measured.
	RoundsLostPer100 float64 `json:"rounds_lost_per_100"`
	ProbeJobs        int     `json:"probe_jobs"`
	ProbeRentMs      float64 `json:"probe_rent_ms"`
	// Copies is the copies of each offer that reached the daemon, and
	// OffersDelivered the share of unique offers it accepted: below 1,
	// its per-forwarder limits or queues dropped the rest.
	Copies float64 `json:"copies_per_msg"`
	// OffersSentPerS and JobsMsgsSentPerS are the unique messages the
	// driver made a second: below the network's rate, this machine could
	// not make the network asked for, and the figures are for a smaller one.
	OffersSentPerS   float64 `json:"offers_sent_per_s"`
	JobsMsgsSentPerS float64 `json:"jobs_msgs_sent_per_s"`
	OffersDelivered  float64 `json:"offers_delivered"`
	JobsDelivered    float64 `json:"jobs_delivered"`
	// Limited is the messages its per-peer limits dropped, by topic.
	Limited map[string]float64 `json:"limited"`
	// DriverCPUCores is what this process spent making the far network,
	// DriverErrors the messages it failed to seal or publish.
	DriverCPUCores float64 `json:"driver_cpu_cores"`
	DriverErrors   uint64  `json:"driver_errors"`
	// DigestsSentPerS is the digests the driver made a second (--classes).
	DigestsSentPerS float64 `json:"digests_sent_per_s,omitempty"`
	// BytesInByTopic is BytesInPerS by the topic's short name (offers,
	// jobs, digest), the topics of every market the daemon joined
	// together.
	BytesInByTopic map[string]float64 `json:"bytes_in_by_topic,omitempty"`
}

// Report is one run: the network, what the daemon paid, and what the cost
// model predicts.
type Report struct {
	Providers int     `json:"providers"`
	JobsPerS  float64 `json:"jobs_per_s"`
	// Shards splits the network; the daemon's shard holds ShardProviders
	// providers and ShardJobsPerS jobs a second.
	Shards         int        `json:"shards"`
	ShardProviders int        `json:"shard_providers"`
	ShardJobsPerS  float64    `json:"shard_jobs_per_s"`
	Neighbours     int        `json:"neighbours"`
	WindowS        float64    `json:"window_s"`
	HeartbeatS     float64    `json:"heartbeat_s"`
	Measured       Measured   `json:"measured"`
	Model          Prediction `json:"model"`
	Load           string     `json:"load"`
	// Flattened copies of the headline figures, as scripts read them.
	PeerBytesInPerS  float64 `json:"peer_bytes_in_per_s"`
	PeerBytesOutPerS float64 `json:"peer_bytes_out_per_s"`
	PeerCPUCores     float64 `json:"peer_cpu_cores"`
	PeerRSSBytes     float64 `json:"peer_rss_bytes"`
	MatchMs          float64 `json:"match_ms"`
	DepartureDetectS float64 `json:"departure_detect_s"`
	RoundsLostPer100 float64 `json:"rounds_lost_per_100"`
	// Classes is the class network's part of the report (--classes).
	Classes *ClassReport `json:"classes,omitempty"`
}

// Run builds e31d and e31 into dir/bin and runs Measure there; log, if
// not nil, receives progress lines.
func Run(ctx context.Context, dir string, log func(format string, args ...any), o Options) (Report, error) {
	return bench.BuildAndMeasure(ctx, dir, log, o, Measure)
}

// Measure starts one real e31d (an observer: no GPUs), connects it to
// o.Neighbours gossip peers that carry a synthetic network of o.Providers
// providers and o.JobsPerS jobs a second, and measures what the daemon
// pays over o.Window.
func Measure(ctx context.Context, e bench.Env, o Options) (Report, error) {
	o = o.withDefaults()
	if o.Providers < 1 {
		return Report{}, errors.New("scale: --providers must be at least 1")
	}
	if o.Classes {
		return measureClasses(ctx, e, o)
	}
	if o.Role != RoleProvider {
		return Report{}, fmt.Errorf("scale: --role %s needs --classes: in a hash-sharded network the daemon hears its shard whatever its role", o.Role)
	}
	shards := o.Shards
	if shards == 0 {
		shards = p2p.SuggestShards(o.Providers)
	}
	if err := (p2p.Shard{Count: shards}).Valid(); err != nil || shards > o.Providers {
		return Report{}, fmt.Errorf("scale: --shards %d: want a power of two from 1 to --providers", shards)
	}
	// The daemon's shard: its share of the providers and of the jobs.
	providers, jobs := (o.Providers+shards-1)/shards, o.JobsPerS/float64(shards)
	r := Report{Providers: o.Providers, JobsPerS: o.JobsPerS, Shards: shards, ShardProviders: providers, ShardJobsPerS: jobs,
		Neighbours: o.Neighbours, WindowS: o.Window.Seconds(), HeartbeatS: o.Heartbeat.Seconds(),
		Model: Predict(float64(providers), jobs)}
	const network = "scale"
	shard := p2p.Shard{Index: 0, Count: shards}
	// The daemon measured, and with probes on a provider beside it in its
	// shard whose devices no far job can use.
	opts := cluster.Options{N: 1, SimGPUsByNode: []string{""}, Dir: filepath.Join(e.Dir, "scale"), Bin: e.Bin,
		Heartbeat: o.Heartbeat, Network: network, Metrics: true, Shards: shards, ArgsByNode: [][]string{{"--shard", "0"}}}
	if o.ProbeEvery > 0 {
		opts.N = 2
		opts.SimGPUsByNode = append(opts.SimGPUsByNode, "4x"+probeModel+":192GiB")
		opts.ArgsByNode = append(opts.ArgsByNode, []string{"--shard", "0"})
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return r, err
	}
	defer c.Stop()
	d := c.Nodes[0]
	addrs := c.Addrs()

	var g task.Group
	dctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		g.Wait(context.Background())
	}()
	var ns []*neighbour
	for range o.Neighbours {
		n, err := newNeighbour(dctx, shard.Scope(network))
		if err != nil {
			return r, err
		}
		defer n.h.Close()
		if err := n.connect(dctx, addrs); err != nil {
			return r, err
		}
		n.drain(dctx, &g)
		ns = append(ns, n)
	}
	e.Logf("scale: %d neighbours connected; making %d provider keys (shard %s)", len(ns), providers, shard)
	if err := waitMesh(dctx, ns, len(c.Nodes)); err != nil {
		return r, err
	}
	f, err := newFar(providers, o.Submitters, o.Heartbeat, ns)
	if err != nil {
		return r, err
	}
	g.Go(func() { f.runOffers(dctx) })
	g.Go(func() { f.runJobs(dctx, &g, jobs, o.QueueWait, max(o.Run, 0)) })

	// Past the warm-up, jobs are declared, leased and released at the
	// rates of a network that has run for a while.
	warm := o.Heartbeat + o.QueueWait + max(o.Run, 0)
	e.Logf("scale: %d providers, %.0f jobs/s in %d shards, %d and %.2f in the daemon's; warming up for %s", o.Providers, o.JobsPerS, shards, providers, jobs, warm)
	if err := task.Sleep(ctx, warm); err != nil {
		return r, err
	}
	before, err := sample(ctx, d, &f.counters)
	if err != nil {
		return r, err
	}
	e.Logf("scale: measuring for %s", o.Window)
	peak := before.rss
	deadline := time.Now().Add(o.Window)
	var pr probeResult
	probed := make(chan struct{})
	if o.ProbeEvery > 0 {
		g.Go(func() {
			defer close(probed)
			pr = probe(dctx, c.Client(0), o.ProbeEvery, deadline)
		})
	}
	for time.Now().Before(deadline) {
		if err := task.Sleep(ctx, min(time.Second, time.Until(deadline))); err != nil {
			return r, err
		}
		if rss, err := bench.VmRSS(d.PID); err == nil {
			peak = max(peak, float64(rss)*1024)
		}
	}
	after, err := sample(ctx, d, &f.counters)
	if err != nil {
		return r, err
	}
	m := after.since(before)
	m.RSSBytes = peak
	m.DepartureS, m.RoundsLostPer100 = -1, -1
	if o.ProbeEvery > 0 {
		select {
		case <-probed:
		case <-ctx.Done():
			return r, ctx.Err()
		}
		if pr.err != nil {
			return r, pr.err
		}
		if m.RoundsLostPer100, err = roundsLostPer100(ctx, d, pr); err != nil {
			return r, err
		}
		m.ProbeJobs, m.ProbeRentMs = pr.leased, pr.rentMs
		e.Logf("scale: %d probe jobs leased, %.0f rounds lost per 100, submit -> lease p50 %.1f ms", pr.leased, m.RoundsLostPer100, pr.rentMs)
	}
	if m.MatchMs, m.MatchP99Ms, m.CutMs, m.Passes, err = passes(ctx, c); err != nil {
		return r, err
	}
	if o.DepartureLimit > 0 {
		e.Logf("scale: one provider goes silent; waiting up to %s for the daemon to drop it", o.DepartureLimit)
		if s, err := departure(ctx, c, f, o.DepartureLimit); err == nil {
			m.DepartureS = s.Seconds()
		} else {
			e.Logf("scale: departure: %v", err)
		}
	}
	r.Measured = m
	r.Load = bench.LoadAvg()
	r.PeerBytesInPerS, r.PeerBytesOutPerS, r.PeerCPUCores, r.PeerRSSBytes = m.BytesInPerS, m.BytesOutPerS, m.CPUCores, m.RSSBytes
	r.MatchMs, r.DepartureDetectS, r.RoundsLostPer100 = m.MatchMs, m.DepartureS, m.RoundsLostPer100
	return r, nil
}

// waitMesh waits until the daemon has grafted every neighbour on both
// topics, as seen from the neighbours.
func waitMesh(ctx context.Context, ns []*neighbour, daemons int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := true
		for _, n := range ns {
			for _, t := range n.topics {
				if len(t.ListPeers()) < daemons {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("scale: the daemons did not join the neighbours' topics within 30s")
		}
		if err := task.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// point is the daemon's counters at one moment.
type point struct {
	at          time.Time
	cpu, driver time.Duration
	rss         float64
	metrics     map[string]float64
	offersSent  uint64
	jobsSent    uint64
	digestsSent uint64
	failed      uint64
}

func sample(ctx context.Context, d *cluster.Node, f *counters) (point, error) {
	p := point{at: time.Now(), offersSent: f.sent[sentOffers].Load(), jobsSent: f.sent[sentJobs].Load(),
		digestsSent: f.sent[sentDigests].Load(), failed: f.failed.Load()}
	cpu, err := bench.ReadProcCPU(d.PID)
	if err != nil {
		return p, fmt.Errorf("scale: the daemon's CPU: %w", err)
	}
	p.cpu = cpu.Self
	self, err := bench.ReadProcCPU(os.Getpid())
	if err == nil {
		p.driver = self.Self
	}
	rss, err := bench.VmRSS(d.PID)
	if err != nil {
		return p, fmt.Errorf("scale: the daemon's RSS: %w", err)
	}
	p.rss = float64(rss) * 1024
	if p.metrics, err = bench.Scrape(ctx, d.Metrics); err != nil {
		return p, fmt.Errorf("scale: the daemon's metrics: %w", err)
	}
	return p, nil
}

func (p point) since(b point) Measured {
	s := p.at.Sub(b.at).Seconds()
	sum := func(m map[string]float64, name string, match ...string) float64 {
		var t float64
		for k, v := range m {
			if !strings.HasPrefix(k, name+"{") {
				continue
			}
			ok := true
			for _, want := range match {
				ok = ok && strings.Contains(k, want)
			}
			if ok {
				t += v
			}
		}
		return t
	}
	delta := func(name string, match ...string) float64 {
		return sum(p.metrics, name, match...) - sum(b.metrics, name, match...)
	}
	m := Measured{
		BytesInPerS:    delta("e31_gossip_bytes_total", `direction="in"`) / s,
		BytesOutPerS:   delta("e31_gossip_bytes_total", `direction="out"`) / s,
		CPUCores:       (p.cpu - b.cpu).Seconds() / s,
		DriverCPUCores: (p.driver - b.driver).Seconds() / s,
		DriverErrors:   p.failed - b.failed,
		Limited:        map[string]float64{},
	}
	delivered := delta("e31_gossip_messages_total", `topic="offers"`, `kind="delivered"`)
	dup := delta("e31_gossip_messages_total", `topic="offers"`, `kind="duplicate"`)
	if delivered > 0 {
		m.Copies = (delivered + dup) / delivered
	}
	m.BytesInByTopic = map[string]float64{}
	for _, t := range []string{p2p.TopicOffers, p2p.TopicJobs, p2p.TopicDigest} {
		m.BytesInByTopic[t] = delta("e31_gossip_bytes_total", `direction="in"`, `topic="`+t+`"`) / s
	}
	m.DigestsSentPerS = float64(p.digestsSent-b.digestsSent) / s
	m.OffersSentPerS = float64(p.offersSent-b.offersSent) / s
	m.JobsMsgsSentPerS = float64(p.jobsSent-b.jobsSent) / s
	if sent := float64(p.offersSent - b.offersSent); sent > 0 {
		m.OffersDelivered = delivered / sent
	}
	if sent := float64(p.jobsSent - b.jobsSent); sent > 0 {
		m.JobsDelivered = delta("e31_gossip_messages_total", `topic="jobs"`, `kind="delivered"`) / sent
	}
	for _, t := range []string{p2p.TopicOffers, p2p.TopicJobs} {
		m.Limited[t] = delta("e31_gossip_limited_total", `topic="`+t+`"`)
	}
	return m
}

// passes reads the daemon's recent epoch passes (its history keeps the
// last few dozen, all within the window) and returns the median Match and
// cut times and Match's 99th percentile.
func passes(ctx context.Context, c *cluster.Cluster) (match, p99, cut float64, n int, err error) {
	ms, err := c.Client(0).Matches(ctx)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("scale: the daemon's passes: %w", err)
	}
	var matches, cuts []float64
	for _, m := range ms {
		if m.Fast {
			continue
		}
		matches = append(matches, m.MatchMs)
		cuts = append(cuts, m.CutMs)
	}
	if len(matches) == 0 {
		return 0, 0, 0, 0, nil
	}
	slices.Sort(matches)
	slices.Sort(cuts)
	return matches[len(matches)/2], matches[min(len(matches)-1, len(matches)*99/100)], cuts[len(cuts)/2], len(matches), nil
}

// departure silences one provider and waits until the daemon's view no
// longer lists it.
func departure(ctx context.Context, c *cluster.Cluster, f *far, limit time.Duration) (time.Duration, error) {
	gone := f.ids[0].String()
	f.silent.Store(1)
	start := time.Now()
	every := max(time.Second, time.Duration(len(f.ids)/5000)*time.Second)
	for time.Since(start) < limit {
		if err := task.Sleep(ctx, every); err != nil {
			return 0, err
		}
		nodes, err := c.Client(0).Nodes(ctx)
		if err != nil {
			return 0, err
		}
		if !slices.ContainsFunc(nodes, func(n api.Node) bool { return n.PeerID == gone }) {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("still in the view after %s", limit)
}

// WriteText prints the report for people: each figure beside the model's.
func (r Report) WriteText(w io.Writer) error {
	if r.Classes != nil {
		return r.writeClassText(w)
	}
	m, p := r.Measured, r.Model
	kb := func(b float64) string { return fmt.Sprintf("%.1f KB/s", b/1e3) }
	rows := [][3]string{
		{"bytes in per s", kb(m.BytesInPerS), kb(p.BytesInPerS)},
		{"bytes out per s", kb(m.BytesOutPerS), kb(p.BytesOutPerS)},
		{"CPU, cores", fmt.Sprintf("%.3f", m.CPUCores), fmt.Sprintf("%.3f", p.CPUCores)},
		{"RSS", fmt.Sprintf("%.0f MB", m.RSSBytes/1e6), fmt.Sprintf("%.0f MB", p.RSSBytes/1e6)},
		{"Match per pass (median, p99)", fmt.Sprintf("%.2f ms, %.2f ms (%d passes)", m.MatchMs, m.MatchP99Ms, m.Passes), fmt.Sprintf("%.2f ms", p.MatchMs)},
		{"cutting the view", fmt.Sprintf("%.2f ms", m.CutMs), fmt.Sprintf("%.2f ms", p.CutMs)},
		{"copies of each offer", fmt.Sprintf("%.2f", m.Copies), fmt.Sprintf("%.1f", p.Copies)},
		{"departure seen", seconds(m.DepartureS), seconds(p.DepartureS)},
		{"rounds lost per 100 jobs", roundsLost(m), "-"},
	}
	if _, err := fmt.Fprintf(w, "scale-bench: %d providers, %g jobs/s, %d neighbours, %.0f s window (load %s)\n",
		r.Providers, r.JobsPerS, r.Neighbours, r.WindowS, r.Load); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%d shards: the peer's holds %d providers and %.2f jobs/s\n\n", r.Shards, r.ShardProviders, r.ShardJobsPerS); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%-30s %-32s %s\n", "one peer pays", "measured", "model"); err != nil {
		return err
	}
	for _, row := range rows {
		if _, err := fmt.Fprintf(w, "%-30s %-32s %s\n", row[0], row[1], row[2]); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\nthe driver made %.0f offers/s (the network: %.0f) and %.0f jobs messages/s, using %.2f cores (%d messages failed)\n"+
		"unique offers accepted %.0f%%, jobs messages %.0f%%; dropped by per-peer limits: offers %.0f, jobs %.0f\n",
		m.OffersSentPerS, float64(r.ShardProviders)/r.HeartbeatS, m.JobsMsgsSentPerS, m.DriverCPUCores, m.DriverErrors,
		100*m.OffersDelivered, 100*m.JobsDelivered, m.Limited[p2p.TopicOffers], m.Limited[p2p.TopicJobs])
	return err
}

func seconds(s float64) string {
	if s < 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.1f s", s)
}

func roundsLost(m Measured) string {
	if m.RoundsLostPer100 < 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.2f (%d jobs; lease p50 %.1f ms)", m.RoundsLostPer100, m.ProbeJobs, m.ProbeRentMs)
}
