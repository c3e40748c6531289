package main

import (
	"context"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type marketOptions struct{ json bool }

func newMarketCommand(g *globalOptions) *cobra.Command {
	var o marketOptions
	cmd := &cobra.Command{
		Use:   "market",
		Short: "Show the whole network's market, one line per shard, from its digests",
		Long: `market lists every shard of the network's market as its latest digest tells
it: about once a minute one provider of each shard publishes the shard's
digest to the whole network, so this lists shards this node takes no part in
too. For each: the shard (CLASS:INDEX/COUNT, or INDEX/COUNT of a hash shard,
"0/1" for an unsharded network; "(own)" marks this node's), its providers
that take work, its boxes with a GPU free ("12 with ≥1 free, 3 whole": whole
where the class gives the box size, else the most free on one box), its
queued jobs and the GPUs they ask, how long the oldest has waited, how old
the digest is, and which provider published it. A shard whose digest is
over five rounds old is left out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMarket(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON: {shards: [{class, index, count, own, providers, free_boxes, queued, queued_gpus, oldest_wait_ms, held, view_hash, publisher, signed_at, age_ms, members}]}")
	return cmd
}

func runMarket(ctx context.Context, o marketOptions, g *globalOptions) error {
	var m api.Market
	if err := g.client().Do(ctx, http.MethodGet, "/v1/market", nil, nil, &m); err != nil {
		return err
	}
	if o.json {
		return g.printJSON(m)
	}
	if len(m.Shards) == 0 {
		writef(g.stdout, "no digest yet: a shard's provider publishes one about once a minute (e31d --digest-every)\n")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tPROVIDERS\tFREE BOXES\tQUEUED\tOLDEST WAIT\tAGE\tPUBLISHER")
	for _, s := range m.Shards {
		name := fmt.Sprintf("%d/%d", s.Index, s.Count)
		if s.Class != "" {
			name = s.Class + ":" + name
		}
		if s.Own {
			name += " (own)"
		}
		queued := fmt.Sprintf("%d job%s, %d GPU%s", s.Queued, plural(s.Queued), s.QueuedGPUs, plural(s.QueuedGPUs))
		wait := "-"
		if s.Queued > 0 {
			wait = (time.Duration(s.OldestWaitMs) * time.Millisecond).Round(time.Second).String()
		}
		age := (time.Duration(s.AgeMs) * time.Millisecond).Round(time.Second)
		writef(tw, "%s\t%d\t%s\t%s\t%s\t%s ago\t%s\n", name, s.Providers, freeBoxes(s), queued, wait, age, shortID(s.Publisher))
	}
	return tw.Flush()
}

// freeBoxes says how many of a shard's boxes have a GPU free: "12 with ≥1
// free, 3 whole" where the shard's class gives its boxes' size, else "12
// with ≥1 free, 3 with 8" (the most free on one box).
func freeBoxes(s api.MarketShard) string {
	some, top, topN := 0, 0, 0
	for k, n := range s.FreeBoxes {
		if k == 0 || n == 0 {
			continue
		}
		some += n
		top, topN = k, n
	}
	out := fmt.Sprintf("%d with ≥1 free", some)
	if some == 0 {
		return out
	}
	if size := market.Class(s.Class).MaxBoxGPUs(); size > 0 && s.Class != "" {
		whole := 0
		for k, n := range s.FreeBoxes {
			if k >= size {
				whole += n
			}
		}
		return fmt.Sprintf("%s, %d whole", out, whole)
	}
	return fmt.Sprintf("%s, %d with %d", out, topN, top)
}
