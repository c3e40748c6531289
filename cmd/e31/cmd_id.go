package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type idOptions struct{ json bool }

func newIDCommand(g *globalOptions) *cobra.Command {
	var o idOptions
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Show this node's peer ID, addresses, GPUs and whether peers can reach it",
		Long: `id shows this node's peer ID, network, version, GPUs, drain, hours, disk and
addresses, and how peers reach it (reach): public, relayed through a relay R, or
unreachable, with why and the fix: a node no peer can reach gets no work.
--json gives the same, reachability as {state, relays, why, fix, line}; a node
that runs no NAT traversal (--nat off, or listening on loopback alone) says
nothing of it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runID(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runID(ctx context.Context, o idOptions, g *globalOptions) error {
	id, err := g.client().ID(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(id)
	}
	fmt.Fprintf(g.stdout, "peer id   %s\nnetwork   %s\n", id.PeerID, id.Network)
	if id.Shard != "" && id.Shard != "0/1" {
		fmt.Fprintf(g.stdout, "shard     %s\n", id.Shard)
	}
	fmt.Fprintf(g.stdout, "version   %s\ngpus      %d\n", id.Version, len(id.GPUs))
	if d := id.Drain; d != nil {
		fmt.Fprintf(g.stdout, "drained   %s\n", describeDrain(*d))
	}
	if id.Hours != "" {
		fmt.Fprintf(g.stdout, "hours     %s (%s)\n", id.Hours, describeWindow(id.Closed, id.OpenUntil))
	}
	if d := id.Disk; d != nil {
		writef(g.stdout, "disk      %s\n", describeDisk(*d))
	}
	if r := id.Reachability; r != nil {
		fmt.Fprintf(g.stdout, "reach     %s\n", describeReach(*r))
	}
	if id.NoCPUJobs {
		fmt.Fprintf(g.stdout, "takes     only jobs that ask for GPUs (--cpu-jobs=false)\n")
	}
	for _, a := range id.Addrs {
		fmt.Fprintf(g.stdout, "address   %s\n", a)
	}
	return nil
}

// describeReach says how peers reach the node: "public", "relayed through
// R", or, for a node no peer can reach, "unreachable: no peer can reach
// this node: it gets no work; why; fix: …".
func describeReach(r api.Reachability) string {
	switch r.State {
	case "public":
		return "public: peers dial this node directly"
	case "relayed":
		return "relayed through " + strings.Join(r.Relays, ", ")
	case "unreachable":
		return "unreachable: " + r.Line
	}
	return r.Line
}

// describeDisk says how the data dir's disk stands and what of it the node
// lends: "412GiB free of 1TiB, 102GiB kept in reserve, 40GiB promised to
// 2 jobs; grants a job up to 256GiB", or "lends no disk, so takes no job:
// …".
func describeDisk(d api.Disk) string {
	s := fmt.Sprintf("%s free of %s, %s kept in reserve, %s promised to %d jobs", market.Size(d.Free), market.Size(d.Size),
		market.Size(d.Reserve), market.Size(d.Promised), d.Jobs)
	if d.NoDisk != "" {
		return "lends no disk, so takes no job: " + d.Why + " (" + s + ")"
	}
	return s + "; grants a job up to " + market.Size(d.MaxJobDisk).String()
}
