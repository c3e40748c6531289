package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type logsOptions struct {
	follow bool
	stderr bool
	tail   int
	task   int
	rank   int
	// retryFor is how long a follow asks again of a daemon that stopped
	// answering (--retry-for).
	retryFor time.Duration
}

func newLogsCommand(g *globalOptions) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs JOB [--task N] [-f] [--stderr] [--tail N]",
		Short: "Print a job's stdout (or stderr), following it while it runs",
		Long: `logs prints what a job wrote to stdout (with --stderr, to stderr): while it
runs, straight from its provider; after, from the logs that came back with its
output. With -f it goes on printing lines as the job writes them, until the job's
run is over. The provider keeps only the tail of a long log; where a reader fell
so far behind that lines were lost, a marker line says so.

A follow that cannot finish (the provider stopped answering) says why and exits
non-zero. A restart of the daemon does not end a follow: while the daemon does
not answer, logs says so on stderr and asks again for up to --retry-for, then
goes on where the log was.`,
		Example: `  e31 logs 7f3a -f
  e31 logs 7f3a --stderr --tail 50
  e31 logs SWEEP --task 7      # task 7 of an array
  e31 logs GANG --rank 1       # part 1 of a gang`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if cmd.Flags().Changed("task") || cmd.Flags().Changed("rank") {
				which := o.task
				if cmd.Flags().Changed("rank") {
					which = o.rank
				}
				ids, err := taskIDs(cmd.Context(), g, id, strconv.Itoa(which))
				if err != nil {
					return err
				}
				id = ids[0]
			}
			return runLogs(cmd.Context(), o, g, id)
		},
	}
	cmd.Flags().IntVar(&o.task, "task", 0, "the log of this task of an array JOB")
	cmd.Flags().IntVar(&o.rank, "rank", 0, "the log of the part of this node rank of a gang JOB (request.nodes)")
	cmd.MarkFlagsMutuallyExclusive("task", "rank")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "go on printing while the job runs")
	cmd.Flags().BoolVar(&o.stderr, "stderr", false, "print stderr instead of stdout")
	cmd.Flags().IntVar(&o.tail, "tail", 0, "start at the last N lines (0: from the beginning)")
	f := cmd.Flags()
	f.DurationVar(&o.retryFor, "retry-for", api.DefaultReconnectFor, "with -f: "+retryForUsage)
	return cmd
}

func runLogs(ctx context.Context, o logsOptions, g *globalOptions, id string) error {
	lo := api.LogOptions{Stream: "stdout", Follow: o.follow, TailLines: o.tail}
	if o.stderr {
		lo.Stream = "stderr"
	}
	cl := g.client()
	if o.follow {
		// A job not yet running has no log: say what it waits for, so
		// that a follow that prints nothing for a while is not a mystery.
		if j, err := cl.Job(ctx, id); err == nil && (j.State == api.JobQueued || j.State == api.JobRenting) {
			why := ""
			if j.Reason != "" {
				why = ": " + j.Reason
			}
			writef(g.stderr, "e31: job %s is %s%s; its log follows once it runs\n", id, j.State, why)
		}
	}
	var err error
	if o.follow {
		err = followLogs(ctx, o, g, id, lo)
	} else {
		err = cl.Logs(ctx, id, lo, g.stdout)
	}
	if errors.Is(err, context.Canceled) {
		return nil // ^C ends a follow; that is not a failure
	}
	return err
}

// followLogs follows a job's log across restarts of the daemon: while the
// daemon does not answer it asks again for up to --retry-for, then takes
// the log up where it was (logResume).
func followLogs(ctx context.Context, o logsOptions, g *globalOptions, id string, lo api.LogOptions) error {
	cl := g.client()
	rc := g.reconnect(o.retryFor, defaultPoll, false)
	tail := o.tail > 0
	if back := rc.Back; back != nil && tail {
		rc.Back = func(down time.Duration) {
			back(down)
			// Where the first request began is not known.
			writef(g.stderr, "e31: the log of job %s goes on from its last %d lines as they are now; lines may repeat\n", id, o.tail)
		}
	}
	out := newLogResume(g.stdout, rc.Reached, func() {
		writef(g.stderr, "e31: the log of job %s begins otherwise than before the daemon's restart (its provider keeps only a long log's tail); lines may repeat or be missing here\n", id)
	})
	first := true
	return rc.Do(ctx, func(ctx context.Context) error {
		if !first && !tail {
			out.restart()
		}
		first = false
		return cl.Logs(ctx, id, lo, out)
	})
}
