package epoch

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Options size a comparison of modes.
type Options struct {
	// Latencies are the one-way link latencies measured.
	Latencies []time.Duration
	// Jobs are declared per run, at random instants, 20 a second.
	Jobs int
	// Seeds is the runs per latency and mode, each with its own
	// declaration instants.
	Seeds int
	// EveryMode also measures the signed cut with fixed 150ms and 300ms
	// delays; by default only Before and Adaptive run.
	EveryMode bool
	// Epoch is the epoch length, as e31d --epoch.
	Epoch time.Duration
}

// Row is one mode at one latency, over every seed.
type Row struct {
	Latency time.Duration
	Mode    Mode
	Jobs    int
	Runs    []Result
	Summary Summary
}

// Report is the comparison's rows, by latency and then mode.
type Report struct {
	Rows []Row
}

// Compare runs every mode at every latency, Seeds times each, and
// summarises the runs of each; log, if not nil, hears of every run as it
// ends, since the table comes only once all have.
func Compare(ctx context.Context, o Options, log func(format string, args ...any)) (Report, error) {
	var rep Report
	modes := []Mode{Before, Adaptive}
	if o.EveryMode {
		modes = []Mode{Before, SignedFixed, Signed300, Adaptive}
	}
	for _, lat := range o.Latencies {
		// Seeds outermost, modes within: the machine's load drifts over
		// minutes, and alternating spreads it over the modes.
		runs := make([][]Result, len(modes))
		for s := range o.Seeds {
			for i, m := range modes {
				r, err := Run(ctx, Params{Latency: lat, Jobs: o.Jobs, Epoch: o.Epoch, Mode: m, Seed: uint64(s + 1)})
				if err != nil {
					return rep, fmt.Errorf("%s, %s: %w", lat, m.Name(), err)
				}
				if log != nil {
					log("%s, %s, seed %d: %d rounds lost of %d jobs", lat, m.Name(), s+1, r.Lost, r.Jobs)
				}
				runs[i] = append(runs[i], r)
			}
		}
		for i, m := range modes {
			rep.Rows = append(rep.Rows, Row{Latency: lat, Mode: m, Jobs: o.Jobs, Runs: runs[i], Summary: Summarise(runs[i])})
		}
	}
	return rep, nil
}

// WriteText prints one line per row, aligned right.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tmode\tjobs\tlost/100 jobs\t(min–max)\tsplit/busy/stale\tdeclined/100\tsplit views\tdelay mean\tdelay max\tto lease\tgossip p50\tgossip p99\ttimer lag p99\t")
	for _, row := range r.Rows {
		s := row.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d×%d\t%.1f\t%.0f–%.0f\t%d/%d/%d\t%.1f\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			row.Latency, row.Mode.Name(), row.Jobs, len(row.Runs), s.LostPer100, s.LostPer100Min, s.LostPer100Max,
			s.LostSplit, s.LostBusy, s.LostStale, s.DeclinedPer100, s.SplitViews, s.BusyEpochs,
			roundMs(s.MeanDelay), roundMs(s.MaxDelay), roundMs(s.ToLeaseMean), roundMs(s.GossipP50), roundMs(s.GossipP99), roundMs(s.LagP99))
	}
	return tw.Flush()
}

func roundMs(d time.Duration) string { return d.Round(time.Millisecond).String() }
