package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type peersOptions struct{ json bool }

func newPeersCommand(g *globalOptions) *cobra.Command {
	var o peersOptions
	cmd := &cobra.Command{
		Use:   "peers [PROVIDER]",
		Short: "List the peers this node is connected to, or show this node's record of a provider",
		Long: `peers lists the peers this node is connected to, and the submitters it
struck off. With a PROVIDER's peer ID it shows instead what this node's own
ledger says of that provider, from receipts both parties signed and the
verdicts kept: its leases, those completed, endings it caused, disputes,
verification wins and losses, GPU probe failures and the median time to
its first receipt. The record is this node's knowledge alone; no other
node sees it, and it never changes the market's matching.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return runPeerRecord(cmd.Context(), o, g, args[0])
			}
			return runPeers(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON; with PROVIDER: {peer_id, score, leases, completed, provider_caused, disputes, verification_wins, verification_losses, gpu_probe_failures, median_first_receipt_s}")
	return cmd
}

func runPeers(ctx context.Context, o peersOptions, g *globalOptions) error {
	peers, err := g.client().Peers(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(peers)
	}
	for _, p := range peers {
		writef(g.stdout, "%s  %-7s  %s\n", p.PeerID, p.Path, strings.Join(p.Addrs, " "))
		if s := p.Struck; s != nil {
			writef(g.stdout, "    struck off until %s (strike %d): %s\n", s.Until.Local().Format(time.DateTime), s.Count, s.Why)
		}
	}
	return nil
}

// runPeerRecord prints this node's record of one provider.
func runPeerRecord(ctx context.Context, o peersOptions, g *globalOptions, id string) error {
	var rec api.PeerRecord
	if err := g.client().Do(ctx, http.MethodGet, api.PeerRecordPath(id), nil, nil, &rec); err != nil {
		return err
	}
	if o.json {
		return g.printJSON(rec)
	}
	first := "-"
	if rec.MedianFirstReceiptSeconds > 0 {
		first = (time.Duration(rec.MedianFirstReceiptSeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
	}
	writef(g.stdout, "%s  %s\n", rec.PeerID, rec.Score)
	writef(g.stdout, "  leases               %d\n", rec.Leases)
	writef(g.stdout, "  completed            %d\n", rec.Completed)
	writef(g.stdout, "  provider-caused      %d\n", rec.ProviderCaused)
	writef(g.stdout, "  disputes             %d\n", rec.Disputes)
	writef(g.stdout, "  verification         %d won, %d lost\n", rec.VerificationWins, rec.VerificationLosses)
	writef(g.stdout, "  gpu probe failures   %d\n", rec.GPUProbeFailures)
	writef(g.stdout, "  first receipt after  %s (median)\n", first)
	return nil
}
