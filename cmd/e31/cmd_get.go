package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type getOptions struct {
	dir        string
	checkpoint bool
	json       bool
}

func newGetCommand(g *globalOptions) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get JOB [-o DIR] [--checkpoint]",
		Short: "Write a job's output (or its last checkpoint) into a folder",
		Long: `get writes what a job returned: DIR/out holds the declared output path's
content, DIR/stdout.log and DIR/stderr.log the job's logs. With --checkpoint it
writes the last checkpoint pulled from the provider instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), o, g, args[0])
		},
	}
	cmd.Flags().StringVarP(&o.dir, "output", "o", "", "folder to write into; must be empty or absent (default ./<job>-out, or ./<job>-checkpoint)")
	cmd.Flags().BoolVar(&o.checkpoint, "checkpoint", false, "write the last checkpoint instead of the output")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runGet(ctx context.Context, o getOptions, g *globalOptions, id string) error {
	cl := g.client()
	j, err := cl.Job(ctx, id)
	if err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		dir = j.ID + "-out"
		if o.checkpoint {
			dir = j.ID + "-checkpoint"
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	res, err := cl.Get(ctx, j.ID, api.GetRequest{Dir: abs, Checkpoint: o.checkpoint})
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(res)
	}
	fmt.Fprintf(g.stdout, "wrote %s (%s) to %s\n", res.CID, humanBytes(uint64(res.Bytes)), res.Dir)
	if !o.checkpoint {
		printLeftOut(g.stderr, j.Skipped)
	}
	return nil
}

type resumeOptions struct {
	wait      bool
	json      bool
	outDir    string
	fromStart bool
}

func newResumeCommand(g *globalOptions) *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume JOB [--wait] [--from-start]",
		Short: "Submit a new job that continues JOB from its last checkpoint",
		Long: `resume submits JOB's declaration again, with its last checkpoint laid out at
its checkpoint path, writable, as the job left it, and E31_RESUME_FROM naming
that path, so the work picks up where the checkpoint left it, on whichever
provider is free.

With --from-start, it submits JOB's declaration as it was first submitted, to
run again from the beginning: a job that declares no checkpoints, or ended
before its first, after its provider was lost, say.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			job, err := g.client().Submit(ctx, api.SubmitRequest{ResumeOf: args[0], FromStart: o.fromStart}, nil)
			if err != nil {
				return err
			}
			if o.wait {
				return followJob(ctx, g, job.ID, followOptions{json: o.json, outDir: o.outDir, poll: defaultPoll})
			}
			if o.json {
				return g.printJSON(job)
			}
			fmt.Fprintf(g.stdout, "%s\n", job.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "follow the new job to its end")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (at least id)")
	cmd.Flags().StringVarP(&o.outDir, "output", "o", "", "with --wait: where to write the output")
	cmd.Flags().BoolVar(&o.fromStart, "from-start", false, "run JOB again from the beginning, not from its last checkpoint")
	return cmd
}
