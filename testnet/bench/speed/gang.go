package speed

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/cluster"
)

// Goals of the gang figures (issue 38).
const (
	goalGangThroughput = 0.5 // of a raw libp2p stream between the same hosts
	goalGangRTT        = 2.0 // of a libp2p ping
)

// GangOptions size the gang run.
type GangOptions struct {
	// Gangs is how many 2-part gangs of a trivial job run one after
	// another to time a gang's start; default 10.
	Gangs int
	// ModuleRoot is where gangnet's package benchmarks run.
	ModuleRoot string
}

// GangReport is the gang run's figures.
type GangReport struct {
	// ThroughputMBs is TCP through the gang network between two parts'
	// namespaces, RawMBs a raw libp2p stream between the same two hosts,
	// in the same run (node/gangnet's BenchmarkThroughput).
	ThroughputMBs float64 `json:"throughput_mb_s"`
	RawMBs        float64 `json:"raw_mb_s"`
	// RTTus is a 1-byte TCP round trip through the gang network;
	// PingUs a libp2p ping between the same hosts as its caller times it,
	// PingSelfUs as ping itself measures it (BenchmarkRTT).
	RTTus      float64 `json:"rtt_us"`
	PingUs     float64 `json:"ping_us"`
	PingSelfUs float64 `json:"ping_self_us"`
	// StartMs are, for each gang, the time from the rent of its last part
	// to the start of its last part's run: the gang lease signed by all,
	// the network made and every link up.
	StartMs []float64 `json:"start_ms"`
}

// MeasureGang runs gangnet's package benchmarks, then Gangs trivial
// 2-part gangs, one at a time, on a network of a submitter and two
// providers of one GPU each.
func MeasureGang(ctx context.Context, e bench.Env, o GangOptions) (GangReport, error) {
	var r GangReport
	e.Logf("gang: gangnet's package benchmarks (TCP and round trips through the gang network, against libp2p)")
	out, err := GoBench{Pkg: "./node/gangnet", Bench: "^Benchmark(Throughput|RTT)$", Benchtime: "3s", Dir: o.ModuleRoot}.Run(ctx)
	if err != nil {
		return r, err
	}
	for _, m := range []struct {
		dst          *float64
		name, metric string
	}{
		{&r.ThroughputMBs, "BenchmarkThroughput/gang", "MB/s"},
		{&r.RawMBs, "BenchmarkThroughput/raw", "MB/s"},
		{&r.RTTus, "BenchmarkRTT/gang", "µs/rtt"},
		{&r.PingUs, "BenchmarkRTT/libp2p-ping", "ns/op"},
		{&r.PingSelfUs, "BenchmarkRTT/libp2p-ping", "µs/rtt"},
	} {
		if *m.dst, err = out.Metric(m.name, m.metric); err != nil {
			return r, err
		}
	}
	r.PingUs /= 1000

	if o.Gangs <= 0 {
		o.Gangs = 10
	}
	e.Logf("gang: %d gangs of 2 trivial parts on 2 providers, one at a time", o.Gangs)
	c, err := bench.StartNetwork(ctx, cluster.Options{N: 3, SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB"},
		Dir: filepath.Join(e.Dir, "gang"), Bin: e.Bin, Heartbeat: node.DefaultHeartbeat})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	cl := c.Client(0)
	d := market.NewDeclaration("gang-bench", []string{"true"}, 1, market.Duration(60_000), nil)
	d.Request.Nodes = 2
	decl, err := json.Marshal(d)
	if err != nil {
		return r, err
	}
	for range o.Gangs {
		id, err := bench.Submit(ctx, cl, decl)
		if err != nil {
			return r, err
		}
		j, err := bench.WaitJob(ctx, cl, id, 2*time.Minute, func(j api.Job) (bool, error) { return j.State.Terminal(), nil })
		if err != nil {
			return r, err
		}
		if j.Outcome != "completed" {
			return r, fmt.Errorf("gang %s ended %s: %s", id, j.Outcome, j.Reason)
		}
		var lastRent, lastRun time.Time
		for _, p := range j.Parts {
			pj, err := cl.Job(ctx, p.ID)
			if err != nil {
				return r, err
			}
			for _, s := range pj.Steps {
				switch {
				case s.Step == api.StepRent && s.At.After(lastRent):
					lastRent = s.At
				case s.Step == api.StepRun && s.At.After(lastRun):
					lastRun = s.At
				}
			}
		}
		r.StartMs = append(r.StartMs, float64(lastRun.Sub(lastRent).Microseconds())/1000)
	}
	e.Logf("gang: start p50 %.0f ms over %d gangs; TCP %.0f MB/s against %.0f raw; RTT %.0f µs against ping %.0f µs",
		bench.SpreadOf(r.StartMs).P50, len(r.StartMs), r.ThroughputMBs, r.RawMBs, r.RTTus, r.PingUs)
	return r, nil
}

// Figures are the gang rows, each against its baseline of the same run.
func (r GangReport) Figures() []bench.Figure {
	tp := r.ThroughputMBs / r.RawMBs
	rtt := r.RTTus / r.PingUs
	start := bench.SpreadOf(r.StartMs)
	return []bench.Figure{
		{Group: "gang", Name: "TCP between two gang parts (gang network over libp2p)", Value: r.ThroughputMBs, Unit: "MB/s",
			Measured: fmt.Sprintf("%.0f MB/s", r.ThroughputMBs), Baseline: fmt.Sprintf("%.0f MB/s raw libp2p stream, same hosts", r.RawMBs),
			Ratio: new(tp), Goal: fmt.Sprintf(">= %.1fx raw", goalGangThroughput), OK: new(tp >= goalGangThroughput)},
		{Group: "gang", Name: "  TCP round trip of 1 byte between two parts", Value: r.RTTus, Unit: "us",
			Measured: fmt.Sprintf("%.1f µs", r.RTTus), Baseline: fmt.Sprintf("libp2p ping %.1f µs as called (%.1f µs as ping times itself)", r.PingUs, r.PingSelfUs),
			Ratio: new(rtt), Goal: fmt.Sprintf("<= %.0fx ping", goalGangRTT), OK: new(rtt <= goalGangRTT)},
		{Group: "gang", Name: "  gang start: last part's rent -> every part running", Value: start.P50, Unit: "ms",
			Measured: fmt.Sprintf("p50 %.0f ms, max %.0f ms (n=%d)", start.P50, start.Max, start.N)},
	}
}
