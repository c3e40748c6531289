package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type peersOptions struct{ json bool }

func newPeersCommand(g *globalOptions) *cobra.Command {
	var o peersOptions
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the peers this node is connected to, and the submitters it struck off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPeers(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
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
