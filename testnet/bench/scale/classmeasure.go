package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// The roles a daemon measured in a class network takes (Options.Role).
const (
	// RoleProvider offers a box of providerSpec: it hears its own
	// subshard's offers and jobs and the digest topic.
	RoleProvider = "provider"
	// RoleSubmitter offers nothing and keeps Options.OpenJobs jobs open:
	// it hears the digest topic and the markets of its open jobs, which
	// it follows.
	RoleSubmitter = "submitter"
)

// marketClasses is e31d --market's value for a class network.
const marketClasses = "classes"

// providerSpec is the provider daemon's box (e31d --sim-gpus): one of the
// mix's 8×H100, in class H100x8.
const providerSpec = "8xH100:80GiB"

// openJobKinds are the jobs a submitter daemon keeps open, in turn: each
// fits a class of the far network, so the daemon routes it there on the
// digests and follows that market. No far provider proposes for them:
// they stay queued, as a job waits its turn.
var openJobKinds = []struct {
	gpus  int
	model string
}{{8, "H100"}, {1, "RTX 4090"}, {8, "H200"}}

// ClassReport is the class network's part of a report.
type ClassReport struct {
	Role string `json:"role"`
	// ClassShards is the --class-shards every peer ran with, Subshards
	// the markets it makes, Sizes each class's providers and subshards.
	ClassShards string      `json:"class_shards"`
	Subshards   int         `json:"subshards"`
	Sizes       []ClassSize `json:"sizes"`
	// Market is the provider daemon's own subshard, with its providers
	// and jobs a second; "" for a submitter.
	Market          string  `json:"market,omitempty"`
	MarketProviders int     `json:"market_providers,omitempty"`
	MarketJobsPerS  float64 `json:"market_jobs_per_s,omitempty"`
	// OpenJobs is the jobs a submitter daemon kept open, Followed the
	// markets it followed for them at the window's end.
	OpenJobs int      `json:"open_jobs,omitempty"`
	Followed []string `json:"followed,omitempty"`
	// Topics are the far network's topics the daemon had joined at the
	// window's end: the only ones it paid for.
	Topics []string `json:"topics"`
	Goals  []Goal   `json:"goals"`
}

// ClassSize is one class of the far network.
type ClassSize struct {
	Class     string `json:"class"`
	Providers int    `json:"providers"`
	Subshards int    `json:"subshards"`
}

// Goal is one of the goals for a role, beside what was measured.
type Goal struct {
	Name     string  `json:"name"`
	Limit    float64 `json:"limit"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
}

// roleGoals are the goals for role (10,000 providers; 100,000
// within twice these, RolesTable): a provider at most 200 KB/s each way
// with holdings, 0.1 core and 300 MB; a submitter-only peer at most
// 50 KB/s (each way).
func roleGoals(role string, m Measured) []Goal {
	bw := 200e3
	if role == RoleSubmitter {
		bw = 50e3
	}
	gs := []Goal{
		{Name: "bytes in per s", Limit: bw, Measured: m.BytesInPerS},
		{Name: "bytes out per s", Limit: bw, Measured: m.BytesOutPerS},
	}
	if role == RoleProvider {
		gs = append(gs, Goal{Name: "cores", Limit: 0.1, Measured: m.CPUCores}, Goal{Name: "RSS bytes", Limit: 300e6, Measured: m.RSSBytes})
	}
	for i := range gs {
		gs[i].Met = gs[i].Measured <= gs[i].Limit
	}
	return gs
}

// measureClasses is Measure for a class network (Options.Classes): one
// daemon in role o.Role, with --market classes and the far network's
// --class-shards, reached through neighbours subscribed to every topic of
// the far network (classFar), which the driver feeds where the daemon
// listens.
func measureClasses(ctx context.Context, e bench.Env, o Options) (Report, error) {
	if o.Role != RoleProvider && o.Role != RoleSubmitter {
		return Report{}, fmt.Errorf("scale: --role %q: want %s or %s", o.Role, RoleProvider, RoleSubmitter)
	}
	if o.Shards > 1 {
		return Report{}, errors.New("scale: --shards does not apply with --classes: a provider's market is derived from its class and peer ID")
	}
	const network = "scale"
	e.Logf("scale: making %d provider keys in classes", o.Providers)
	net, err := newClassNet(network, o.Providers, o.Heartbeat)
	if err != nil {
		return Report{}, err
	}
	cr := &ClassReport{Role: o.Role, ClassShards: net.ClassShards(), Subshards: len(net.subs), Sizes: net.sizes()}
	r := Report{Providers: o.Providers, JobsPerS: o.JobsPerS, Shards: len(net.subs), Neighbours: o.Neighbours,
		WindowS: o.Window.Seconds(), HeartbeatS: o.Heartbeat.Seconds(), Classes: cr}
	opts := cluster.Options{N: 1, SimGPUsByNode: []string{""}, Dir: filepath.Join(e.Dir, "scale"), Bin: e.Bin,
		Heartbeat: o.Heartbeat, Network: network, Metrics: true, Market: marketClasses, ClassShards: cr.ClassShards}
	if o.Role == RoleProvider {
		opts.SimGPUsByNode = []string{providerSpec}
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return r, err
	}
	defer c.Stop()
	d := c.Nodes[0]

	var g task.Group
	dctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		g.Wait(context.Background())
	}()
	names := map[string]string{}
	for _, t := range net.topics() {
		names[t] = t
	}
	var ns []*neighbour
	for range o.Neighbours {
		// A small buffer: of the neighbour's own subscriptions only the
		// daemon's topics carry much, and drain keeps up with those.
		n, err := newNeighbourOn(dctx, names, 256)
		if err != nil {
			return r, err
		}
		defer n.h.Close()
		if err := n.connect(dctx, c.Addrs()); err != nil {
			return r, err
		}
		n.drain(dctx, &g)
		ns = append(ns, n)
	}
	f, err := newClassFar(net, o.Submitters, ns)
	if err != nil {
		return r, err
	}
	e.Logf("scale: %d neighbours on %d topics each; waiting for the daemon to join its own", len(ns), len(names))
	if err := waitJoined(dctx, f, o.Role); err != nil {
		return r, err
	}
	g.Go(func() { f.watchLive(dctx) })
	g.Go(func() { f.runOffers(dctx) })
	g.Go(func() { f.runJobs(dctx, &g, o.JobsPerS, o.QueueWait, max(o.Run, 0)) })
	g.Go(func() { f.runDigests(dctx, digest.DefaultEvery, o.QueueWait) })

	if o.Role == RoleProvider {
		j := daemonMarket(f)
		if j < 0 {
			return r, errors.New("scale: the provider daemon joined no offers topic of the far network's subshards")
		}
		s := &net.subs[j]
		cr.Market, cr.MarketProviders = s.shard.String(), len(s.members)
		cr.MarketJobsPerS = o.JobsPerS * float64(len(s.members)) / float64(o.Providers)
		r.ShardProviders, r.ShardJobsPerS = cr.MarketProviders, cr.MarketJobsPerS
		r.Model = Predict(float64(cr.MarketProviders), cr.MarketJobsPerS)
	} else {
		cr.OpenJobs = o.OpenJobs
		e.Logf("scale: waiting for the daemon to hear the first round of %d digests", len(net.subs))
		if err := waitDigests(dctx, d, len(net.subs)); err != nil {
			return r, err
		}
		if err := openJobs(dctx, c.Client(0), o.OpenJobs); err != nil {
			return r, err
		}
	}

	warm := o.Heartbeat + o.QueueWait + max(o.Run, 0)
	e.Logf("scale: %d providers in %d markets (%s), %.0f jobs/s; the daemon a %s; warming up for %s",
		o.Providers, len(net.subs), cr.ClassShards, o.JobsPerS, o.Role, warm)
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
	if m.MatchMs, m.MatchP99Ms, m.CutMs, m.Passes, err = passes(ctx, c); err != nil {
		return r, err
	}
	cr.Topics = f.liveTopics()
	if o.Role == RoleSubmitter {
		cr.Followed = followed(net, cr.Topics)
	}
	cr.Goals = roleGoals(o.Role, m)
	r.Measured = m
	r.Load = bench.LoadAvg()
	r.PeerBytesInPerS, r.PeerBytesOutPerS, r.PeerCPUCores, r.PeerRSSBytes = m.BytesInPerS, m.BytesOutPerS, m.CPUCores, m.RSSBytes
	r.MatchMs, r.DepartureDetectS, r.RoundsLostPer100 = m.MatchMs, m.DepartureS, m.RoundsLostPer100
	return r, nil
}

// sizes are the far network's classes, by name.
func (c *classNet) sizes() []ClassSize {
	byClass := map[string]*ClassSize{}
	for j := range c.subs {
		s := c.subs[j].shard
		cs := byClass[s.Class]
		if cs == nil {
			cs = &ClassSize{Class: s.Class, Subshards: c.counts[s.Class]}
			byClass[s.Class] = cs
		}
		cs.Providers += len(c.subs[j].members)
	}
	var out []ClassSize
	for _, cs := range byClass {
		out = append(out, *cs)
	}
	slices.SortFunc(out, func(a, b ClassSize) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// waitJoined waits until the daemon has joined the digest topic and, a
// provider, its own subshard's offers topic, as the neighbours see it.
func waitJoined(ctx context.Context, f *classFar, role string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.refreshLive()
		if f.isLive(f.digestName) && (role != RoleProvider || daemonMarket(f) >= 0) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("scale: the daemon did not join the digest topic, or a provider its subshard's offers topic, within 30s")
		}
		if err := task.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// daemonMarket is the subshard whose offers topic the daemon has joined:
// a provider's own; -1 if none.
func daemonMarket(f *classFar) int {
	for j, name := range f.offerNames {
		if f.isLive(name) {
			return j
		}
	}
	return -1
}

// followed are the markets whose jobs topics are among topics.
func followed(c *classNet, topics []string) []string {
	var out []string
	for j := range c.subs {
		if slices.Contains(topics, p2p.TopicName(c.subs[j].shard.Scope(c.network), p2p.TopicJobs)) {
			out = append(out, c.subs[j].shard.String())
		}
	}
	return out
}

// waitDigests waits until the daemon has accepted n digests, so that the
// jobs it is given are routed on the whole market's shape.
func waitDigests(ctx context.Context, d *cluster.Node, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms, err := bench.Scrape(ctx, d.Metrics)
		if err != nil {
			return fmt.Errorf("scale: the daemon's metrics: %w", err)
		}
		got := 0.0
		for k, v := range ms {
			if strings.HasPrefix(k, "e31_gossip_messages_total{") && strings.Contains(k, `topic="digest"`) && strings.Contains(k, `kind="delivered"`) {
				got += v
			}
		}
		if got >= float64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scale: the daemon accepted %.0f of %d digests within 30s", got, n)
		}
		if err := task.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// openJobs submits n one-hour jobs to the daemon, of openJobKinds in
// turn, which it routes to a market of the far network and follows.
func openJobs(ctx context.Context, cl *api.Client, n int) error {
	for i := range n {
		k := openJobKinds[i%len(openJobKinds)]
		d := market.NewDeclaration(fmt.Sprintf("scale-open-%d", i), []string{"true"}, k.gpus, market.Hour, nil)
		d.Request.GPUModel = k.model
		decl, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := bench.Submit(ctx, cl, decl); err != nil {
			return fmt.Errorf("scale: the submitter's open job %d (%d × %s): %w", i, k.gpus, k.model, err)
		}
	}
	return nil
}
