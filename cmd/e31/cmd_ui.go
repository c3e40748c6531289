package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"
)

type uiOptions struct {
	open bool
	json bool
}

func newUICommand(g *globalOptions) *cobra.Command {
	var o uiOptions
	cmd := &cobra.Command{
		Use:   "ui [--open]",
		Short: "Print a one-time link that opens the daemon's dashboard",
		Long: `ui asks the daemon for a link to its dashboard that opens it once, within
two minutes: the browser that opens it is given a cookie that lets it read
the dashboard (HttpOnly, and sent by no other site's page), and is shown
the dashboard. The daemon serves the dashboard at its API's address where
that is a loopback host:port, else at its --ui address. --open hands the
link to xdg-open.`,
		Example: `  e31 ui          # then open the link in a browser on this machine
  e31 ui --open`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUI(cmd.Context(), o, g)
		},
	}
	cmd.Flags().BoolVar(&o.open, "open", false, "open the link with xdg-open")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runUI(ctx context.Context, o uiOptions, g *globalOptions) error {
	link, err := g.client().UILink(ctx)
	if err != nil {
		return err
	}
	if o.json {
		if err := g.printJSON(link); err != nil {
			return err
		}
	} else {
		writef(g.stdout, "%s\n", link.URL)
	}
	if !o.open {
		return nil
	}
	opener, err := exec.LookPath("xdg-open")
	if err != nil {
		return errors.New("--open: no xdg-open here; open the link above in a browser")
	}
	if err := exec.CommandContext(ctx, opener, link.URL).Run(); err != nil {
		return fmt.Errorf("--open: xdg-open: %w", err)
	}
	return nil
}
