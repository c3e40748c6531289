package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type nodesOptions struct{ json, lost bool }

func newNodesCommand(g *globalOptions) *cobra.Command {
	var o nodesOptions
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the providers in this node's view and their GPUs",
		Long: `nodes lists every provider whose offer this node holds: its GPUs (free or
held), CPUs and memory, this node's score of it from its own ledger ("12
ok/1 bad": completed leases, and endings it caused or verifications it lost;
"new"; e31 peers PROVIDER has the detail), and when its last heartbeat
arrived. A provider that
misses three heartbeats leaves the list; with --lost, those that left it in
the last hour follow, marked lost, as their last offer stood.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNodes(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON: [{peer_id, gpus: [{index, uuid, model, memory_bytes, free}], score, last_seen}]")
	cmd.Flags().BoolVar(&o.lost, "lost", false, "also list the providers lost in the last hour (missed heartbeats), with lost_at in JSON")
	return cmd
}

func runNodes(ctx context.Context, o nodesOptions, g *globalOptions) error {
	var nodes []api.Node
	var err error
	if o.lost {
		// The providers lost lately follow those in view.
		err = g.client().Do(ctx, http.MethodGet, "/v1/nodes?lost=1", nil, nil, &nodes)
	} else {
		nodes, err = g.client().Nodes(ctx)
	}
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(nodes)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tGPUS\tFREE\tMODELS\tPRICE/GPU-H\tREACH\tSCORE\tLAST SEEN")
	for _, n := range nodes {
		free := 0
		for _, gpu := range n.GPUs {
			if gpu.Free {
				free++
			}
		}
		name := n.PeerID
		if n.Self {
			name += " (self)"
		}
		if n.Draining {
			name += " (draining)"
		}
		switch n.NoDisk {
		case "":
		case "full":
			name += " (disk full)"
		case "unbounded":
			name += " (no disk quotas)"
		default:
			name += " (no disk: " + n.NoDisk + ")"
		}
		if n.NoCPUJobs {
			name += " (GPU jobs only)"
		}
		if n.LostAt != nil {
			name += fmt.Sprintf(" (lost %s ago)", time.Since(*n.LostAt).Round(time.Second))
		}
		if n.Closed || n.OpenUntil != nil {
			name += " (" + describeWindow(n.Closed, n.OpenUntil) + ")"
		}
		reach := n.Reach
		if reach == "" {
			reach = "-"
		}
		score := n.Score
		if score == "" {
			score = "-"
		}
		price := "free"
		if n.Price != 0 {
			price = n.Price.String() + " " + n.Currency
		}
		writef(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s ago\n", name, len(n.GPUs), free, models(n.GPUs), price, reach, score, time.Since(n.LastSeen).Round(100*time.Millisecond))
	}
	return tw.Flush()
}

// models summarises GPU models: "2xH100 80GiB, 1xL4 24GiB".
func models(gpus []api.GPU) string {
	var order []string
	count := map[string]int{}
	for _, g := range gpus {
		k := fmt.Sprintf("%s %s", g.Model, humanBytes(g.MemoryBytes))
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%dx%s", count[k], k)
	}
	return strings.Join(parts, ", ")
}

func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	v := float64(b) / float64(div)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%ciB", int64(v), "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTPE"[exp])
}
