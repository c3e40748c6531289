package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type statusOptions struct{ json bool }

func newStatusCommand(g *globalOptions) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's state, its steps so far, and why it waits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), o, g, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (id, state, outcome, attribution, provider, steps, exit_code, output, checkpoint, gpus, reason)")
	return cmd
}

func runStatus(ctx context.Context, o statusOptions, g *globalOptions, id string) error {
	j, err := g.client().Job(ctx, id)
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(j)
	}
	printJob(g, j)
	return nil
}

func printJob(g *globalOptions, j api.Job) {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s (%s)\n", j.ID, j.Name)
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	if j.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", j.Reason)
	}
	if j.Outcome != "" {
		fmt.Fprintf(tw, "outcome\t%s (attributed to %s)\n", j.Outcome, j.Attribution)
	}
	if j.ExitCode != nil {
		fmt.Fprintf(tw, "exit code\t%d\n", *j.ExitCode)
	}
	if j.Provider != "" {
		fmt.Fprintf(tw, "provider\t%s\n", j.Provider)
		fmt.Fprintf(tw, "lease\t%s\n", j.Lease)
		fmt.Fprintf(tw, "gpus\t%s\n", strings.Join(j.GPUs, ", "))
	}
	for _, s := range j.GPUsSeen {
		fmt.Fprintf(tw, "gpu seen by the run\t%s (%s)\n", s.UUID, s.Model)
	}
	if j.GPUMismatch != "" {
		fmt.Fprintf(tw, "GPU MISMATCH\t%s\n", j.GPUMismatch)
	}
	if j.Output != "" {
		fmt.Fprintf(tw, "output\t%s\n", j.Output)
	}
	if j.Checkpoint != "" {
		fmt.Fprintf(tw, "checkpoint\t%s\n", j.Checkpoint)
	}
	if j.ProviderKeepsUntil != nil {
		fmt.Fprintf(tw, "provider keeps until\t%s (this node keeps its copy until removed)\n", j.ProviderKeepsUntil.Local().Format(time.RFC3339))
	}
	for _, s := range j.Skipped {
		fmt.Fprintf(tw, "left out of output\t%s\n", s)
	}
	for _, s := range j.Steps {
		fmt.Fprintf(tw, "step %s\t%s\n", s.Step, s.At.Local().Format(time.RFC3339Nano))
	}
	tw.Flush()
}

type listOptions struct{ json bool }

func newListCommand(g *globalOptions) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the jobs submitted from this node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jobs, err := g.client().Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return g.printJSON(jobs)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tNAME\tSTATE\tOUTCOME\tSUBMITTED")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, j.State, j.Outcome, j.Submitted.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func newWithdrawCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "withdraw JOB",
		Short: "Withdraw a job: a queued one owes nothing; a running one is stopped and released",
		Long: `withdraw takes a job back. A queued job ends at once, with no lease and no
receipt. A leased job gets SIGTERM and its grace period to write a last
checkpoint, then goes through release with outcome "withdrawn".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.client().Withdraw(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return g.printJSON(j)
			}
			if j.State == api.JobWithdrawn {
				fmt.Fprintf(g.stdout, "job %s withdrawn; nothing is owed\n", j.ID)
			} else {
				fmt.Fprintf(g.stdout, "job %s: its provider is stopping it; it ends released with outcome withdrawn\n", j.ID)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
