package main

import (
	"context"
	"io"
	"time"

	"github.com/e31network/e31/testnet/bench/scale"
	"github.com/spf13/cobra"
)

type scaleBenchOptions struct {
	scale scale.Options
	mesh  scale.MeshOptions
	// market runs the market simulation instead (--market).
	market  bool
	marketO scale.MarketOptions
	json    bool
	keep    bool
	// table prints runs of --classes side by side instead (--table).
	table []string
}

func newScaleBenchCommand() *cobra.Command {
	var o scaleBenchOptions
	cmd := &cobra.Command{
		Use:   "scale-bench",
		Short: "Measure what one real e31d pays in a simulated network of --providers providers and --jobs-per-s jobs",
		Long: `scale-bench builds e31d and e31, starts one daemon on 127.0.0.1 and
connects it to --neighbours real gossipsub peers that carry a synthetic
network: --providers providers, each with its own key, offering 8 GPUs every
--heartbeat, and --jobs-per-s declarations from --submitters submitters in turn, each
open for --queue-wait, then leased by a provider (a lease announcement signed by
both) and released after --run (--run -1s: withdrawn instead). The network's market is split into --shards
shards (default: as many as keep each at or below 256 providers, as such a
network would be run; --shards 1 for one market) and the daemon takes part
in one: the synthetic network it hears is that shard's share of the
providers and jobs. Every unique message reaches the daemon
once from each neighbour, as from a gossipsub mesh. After a warm-up it
measures, over --window, the daemon's gossip bytes in and out, CPU, RSS,
Match and view-cut times per epoch pass, copies per offer, and the share of
unique messages its per-peer limits let through. Meanwhile the daemon
submits a job of its own every --probe-every, which only a second real
daemon in its shard (a provider of B200s; the far jobs ask for H100s) can
take: the rounds its Match loses on them (e31_match_rounds_lost_total) per
100 leased are the network's lost rounds. Then it measures how long a
provider that goes silent stays in its view. Each figure is printed beside the cost
model's prediction (testnet/bench/scale/model.go).

With --mesh N it runs instead the multi-hop check of what the near network
assumes: N real gossip hosts in process, each dialling a few at random,
publishing --mesh-rate messages a second; it prints the copies of each
message a host receives and sends, and publish-to-delivery delays.

With --market it runs instead the market simulation, with no daemon: a
seeded trace of --providers providers (default 2000 in this mode; the mix
of docs/figures.md: consumer cards, A100/H100 boxes, 8xH200, a rare
8xB200) and one-hour jobs at --load of each pool's GPUs, from Zipf-skewed
submitters, over --hours after an hour's warm-up, replayed in three
designs side by side: hash shards (today's), class shards with jobs routed
on digests, and one market, each market placing by the real market.Match
every 10 s. It prints, per class of job, the share that waited, p50/p90
wait, the jobs never placeable and the share stranded (waited while a
fitting box was free elsewhere), beside the issue's goals.

With --classes the network's market is split by resource class, as e31d
--market classes splits it: the far network is the mix above, each
provider in the subshard of its class that its peer ID picks, each class
in as many subshards as keep each at or below 256 providers (the daemon is
told the same with --class-shards), each offer listing 0 to 40 held CIDs,
and each subshard's digest published once a minute on the digest topic
by the member every peer elects. The neighbours join every topic of the
far network; the driver makes the messages of the topics the daemon has
joined, which are the only ones gossipsub sends it. --role provider: the
daemon offers one 8xH100 box and hears its subshard and the digests;
--role submitter: it offers nothing, keeps --open-jobs jobs open (8xH100,
1xRTX 4090, 8xH200 in turn), routed on the digests, and hears the digests
and the markets it follows for them. Each figure is printed beside the
goal of the role. --table A.json,B.json,... prints instead runs of --classes
--json side by side, role by network size, beside the goals.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.table) > 0 {
				return runRolesTable(o, cmd.OutOrStdout())
			}
			if o.market {
				if !cmd.Flags().Changed("providers") {
					o.marketO.Providers = 0 // the simulation's own default
				} else {
					o.marketO.Providers = o.scale.Providers
				}
				if cmd.Flags().Changed("submitters") {
					o.marketO.Submitters = o.scale.Submitters
				}
				return runMarketSim(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runScaleBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.scale.Providers, "providers", 1000, "providers in the simulated network (with --market: default 2000)")
	f.Float64Var(&o.scale.JobsPerS, "jobs-per-s", 10, "jobs declared a second in the simulated network")
	f.IntVar(&o.scale.Shards, "shards", 0, "shards the network's market is split into, a power of two (default: enough for at most 256 providers each; not with --classes, which splits each class so)")
	f.IntVar(&o.scale.Neighbours, "neighbours", 6, "gossip peers carrying the network to the daemon")
	f.DurationVar(&o.scale.Window, "window", time.Minute, "how long the daemon's costs are measured, after the warm-up")
	f.DurationVar(&o.scale.Heartbeat, "heartbeat", 10*time.Second, "every provider's offer interval, the daemon's too")
	f.DurationVar(&o.scale.QueueWait, "queue-wait", 30*time.Second, "how long each job stays open")
	f.DurationVar(&o.scale.Run, "run", time.Minute, "how long each lease holds its GPUs before its release; negative: jobs are withdrawn, never leased")
	f.IntVar(&o.scale.Submitters, "submitters", 100, "submitters taking turns to declare the jobs (with --market: drawn by Zipf, default 1000)")
	f.DurationVar(&o.scale.DepartureLimit, "departure", 2*time.Minute, "longest wait for a silent provider to leave the daemon's view (0: skip; not measured with --classes)")
	f.DurationVar(&o.scale.ProbeEvery, "probe-every", 2*time.Second, "how often the daemon submits a job of its own for a real provider beside it, whose rounds lost are counted (negative: none; not with --classes)")
	f.IntVar(&o.mesh.Hosts, "mesh", 0, "instead, the multi-hop check: this many real gossip hosts, copies per message and delays")
	f.Float64Var(&o.mesh.Rate, "mesh-rate", 20, "messages a second in the multi-hop check")
	f.DurationVar(&o.mesh.Window, "mesh-window", 30*time.Second, "how long the multi-hop check publishes")
	f.BoolVar(&o.market, "market", false, "instead, the market simulation (no daemon): three designs of the market on one seeded trace, what each costs the jobs")
	f.Float64Var(&o.marketO.Load, "load", 0.75, "with --market: GPU-hours asked per GPU-hour offered, 0.5 to 0.9")
	f.Float64Var(&o.marketO.Hours, "hours", 3, "with --market: hours of arrivals counted, after an hour's warm-up (an hour's drain follows)")
	f.Uint64Var(&o.marketO.Seed, "seed", 1, "with --market: the seed of the trace and of every draw (the same seed, the same report)")
	f.BoolVar(&o.scale.Classes, "classes", false, "split the simulated network by resource class (e31d --market classes): the issue's mix of boxes in class subshards, offers with holdings, a digest per subshard a minute")
	f.StringVar(&o.scale.Role, "role", scale.RoleProvider, "with --classes, what the daemon is: provider (offers one 8xH100 box) or submitter (offers nothing, keeps --open-jobs jobs open)")
	f.IntVar(&o.scale.OpenJobs, "open-jobs", 1, "with --role submitter, the jobs the daemon keeps open, each in a market it then follows")
	f.StringSliceVar(&o.table, "table", nil, "instead, print runs of --classes --json (files, comma-separated) side by side, role by providers, beside the goals")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.BoolVar(&o.keep, "keep", false, "keep the daemon's data dir and log, and print where")
	return cmd
}

func runMarketSim(ctx context.Context, o scaleBenchOptions, stdout, stderr io.Writer) error {
	r, err := scale.RunMarket(ctx, progress(stderr), o.marketO)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, r, r.WriteText)
}

func runScaleBench(ctx context.Context, o scaleBenchOptions, stdout, stderr io.Writer) error {
	logf := progress(stderr)
	if o.mesh.Hosts > 0 {
		r, err := scale.MeasureMesh(ctx, logf, o.mesh)
		if err != nil {
			return err
		}
		return printReport(stdout, o.json, r, r.WriteText)
	}
	dir, done, err := workDir("", "e31-scale-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	r, err := scale.Run(ctx, dir, logf, o.scale)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, r, r.WriteText)
}

func runRolesTable(o scaleBenchOptions, stdout io.Writer) error {
	reports, err := scale.ReadReports(o.table)
	if err != nil {
		return err
	}
	t, err := scale.NewRolesTable(reports)
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, t, t.WriteText)
}
