package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type drainOptions struct {
	graceful, quick, now bool
	deadline             time.Duration
	json                 bool
}

func newDrainCommand(g *globalOptions) *cobra.Command {
	var o drainOptions
	cmd := &cobra.Command{
		Use:   "drain [--graceful | --quick | --now] [--deadline D]",
		Short: "Take this node's GPUs back: it takes no new work, and what runs ends as asked",
		Long: `drain takes this node's GPUs back from the network, run against the
provider's own daemon. Its offer says it is draining, and no job is placed on
it until e31 undrain.

  --graceful (the default)  running jobs go on to their end; with --deadline,
                            what still runs then is drained --quick
  --quick                   each running job gets SIGTERM and its grace to
                            write a last checkpoint; the lease ends
                            preempted (the provider's, and not charged) and
                            the job goes on elsewhere from that checkpoint,
                            or from the start if it keeps none
  --now                     as --quick, without the grace

A later drain changes the mode: a graceful drain made quick. A drain lasts
across a restart of the daemon.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDrain(cmd.Context(), o, g)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.graceful, "graceful", false, "let running jobs finish (the default)")
	f.BoolVar(&o.quick, "quick", false, "stop running jobs after a last checkpoint; they go on elsewhere")
	f.BoolVar(&o.now, "now", false, "stop running jobs at once; they go on elsewhere from their last checkpoint")
	f.DurationVar(&o.deadline, "deadline", 0, "with --graceful, drain quickly what still runs after this long (e.g. 2h)")
	f.BoolVar(&o.json, "json", false, "print JSON")
	cmd.MarkFlagsMutuallyExclusive("graceful", "quick", "now")
	return cmd
}

func runDrain(ctx context.Context, o drainOptions, g *globalOptions) error {
	req := api.DrainRequest{Mode: api.DrainGraceful}
	switch {
	case o.quick:
		req.Mode = api.DrainQuick
	case o.now:
		req.Mode = api.DrainNow
	}
	if o.deadline < 0 {
		return errors.New("--deadline must be positive")
	}
	if o.deadline > 0 {
		if req.Mode != api.DrainGraceful {
			return fmt.Errorf("--deadline is for a graceful drain; --%s stops what runs now", req.Mode)
		}
		req.Deadline = o.deadline.String()
	}
	d, err := g.client().Drain(ctx, req)
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(d)
	}
	fmt.Fprintf(g.stdout, "drained: %s\n", describeDrain(d))
	return nil
}

type undrainOptions struct{ json bool }

func newUndrainCommand(g *globalOptions) *cobra.Command {
	var o undrainOptions
	cmd := &cobra.Command{
		Use:   "undrain",
		Short: "End this node's drain: it takes work again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := g.client().Undrain(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return g.printJSON(d)
			}
			fmt.Fprintln(g.stdout, "undrained: taking work again")
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

// describeDrain says what a drain is doing, for a person.
func describeDrain(d api.Drain) string {
	s := fmt.Sprintf("%s, since %s", d.Mode, d.Since.Local().Format(time.RFC3339))
	switch d.By {
	case api.DrainByReclaim:
		s += ", by --reclaim-on-use: " + d.Reason + " (lifted once the GPUs are left alone)"
	case api.DrainByStop:
		s += ", for the daemon's stop"
	}
	if d.Deadline != nil {
		s += fmt.Sprintf(", quick at %s", d.Deadline.Local().Format(time.RFC3339))
	}
	switch d.Leases {
	case 0:
		s += "; nothing runs"
	case 1:
		s += "; 1 lease still running"
	default:
		s += fmt.Sprintf("; %d leases still running", d.Leases)
	}
	return s
}

// describeWindow says where a node stands in its contribution hours.
func describeWindow(closed bool, until *time.Time) string {
	switch {
	case closed:
		return "outside its hours"
	case until != nil:
		return "open until " + until.Local().Format("Mon 15:04")
	}
	return "open"
}
