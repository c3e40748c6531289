package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type getOptions struct {
	dir        string
	checkpoint bool
	attempt    int
	json       bool
}

func newGetCommand(g *globalOptions) *cobra.Command {
	var o getOptions
	var sel jobSelection
	cmd := &cobra.Command{
		Use:   "get JOB...|--label K=V|--name GLOB [-o DIR] [--checkpoint]",
		Short: "Write jobs' output (or their last checkpoint) into folders",
		Long: `get writes what a job returned: DIR/out holds the declared output path's
content, DIR/stdout.log and DIR/stderr.log the job's logs. With --checkpoint it
writes the last checkpoint pulled from the provider instead. A resumed job
gives its last attempt's; --attempt N an earlier one's. Given several
jobs, it writes each into a folder of its own, DIR/<job> (DIR default .,
each folder ./<job>-out), tries every job even when one fails, and fails
naming those it could not write. --label, --name, --state and --since select
the jobs instead (e31 get --label pipeline=nightly -o results), each into its
own folder.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := selectTargets(cmd.Context(), g, args, sel, false)
			if err != nil {
				return err
			}
			if len(ids) == 1 && !sel.set() {
				return runGet(cmd.Context(), o, g, ids[0])
			}
			// Several, or a selection (however many it matched): a
			// folder a job.
			return getSeveral(cmd.Context(), o, g, ids)
		},
	}
	sel.addFlags(cmd.Flags(), "get")
	cmd.Flags().StringVarP(&o.dir, "output", "o", "", "folder to write into; must be empty or absent (default ./<job>-out, or ./<job>-checkpoint); with several jobs, the folder that holds one folder a job")
	cmd.Flags().BoolVar(&o.checkpoint, "checkpoint", false, "write the last checkpoint instead of the output")
	cmd.Flags().IntVar(&o.attempt, "attempt", 0, "write what attempt N of a resumed job returned or checkpointed (1: the job as submitted; default the last; e31 status JOB lists them)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (one object a job)")
	return cmd
}

// getSeveral writes each job into a folder of its own, DIR/<job> (DIR
// default .), trying every job even when one fails.
func getSeveral(ctx context.Context, o getOptions, g *globalOptions, ids []string) error {
	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o755); err != nil {
			return fmt.Errorf("-o %s: %w", o.dir, err)
		}
	}
	var failed []string
	for _, id := range ids {
		one := o
		if o.dir != "" {
			one.dir = filepath.Join(o.dir, id)
		}
		if err := runGet(ctx, one, g, id); err != nil {
			writef(g.stderr, "e31: get %s: %v\n", id, err)
			failed = append(failed, id)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d jobs not written: %s", len(failed), len(ids), strings.Join(failed, " "))
	}
	return nil
}

func runGet(ctx context.Context, o getOptions, g *globalOptions, id string) error {
	cl := g.client()
	j, err := cl.Job(ctx, id)
	if err != nil {
		return err
	}
	if j.Tasks != nil {
		return getArray(ctx, o, g, j)
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
	res, err := cl.Get(ctx, j.ID, api.GetRequest{Dir: abs, Checkpoint: o.checkpoint, Attempt: o.attempt})
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(res)
	}
	writef(g.stdout, "wrote %s (%s) to %s\n", res.CID, humanBytes(uint64(res.Bytes)), res.Dir)
	if !o.checkpoint {
		printLeftOut(g.stderr, j.Skipped)
	}
	return nil
}

// getArray writes each task's output of an array at DIR/<index>/out, a
// few tasks at a time, and says which tasks had none.
func getArray(ctx context.Context, o getOptions, g *globalOptions, j api.Job) error {
	dir := o.dir
	if dir == "" {
		dir = j.ID + "-out"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("-o %s: %w", dir, err)
	}
	cl := g.client()
	n := j.Tasks.Total
	results := make([]api.GetResult, n)
	errs := make([]error, n)
	bar := newTaskBar(g.stderr, n, o.json)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, 8) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				id := market.TaskID(arrayID(j), i)
				results[i], errs[i] = cl.Get(ctx, id, api.GetRequest{Dir: filepath.Join(abs, strconv.Itoa(i)), Checkpoint: o.checkpoint, Attempt: o.attempt})
				bar.add()
			}
		})
	}
	wg.Wait()
	bar.finish()
	if err := ctx.Err(); err != nil {
		return err
	}
	var bytes int64
	var missing []string
	for i, err := range errs {
		if err != nil {
			missing = append(missing, fmt.Sprintf("%d (%v)", i, firstLine(err.Error())))
			continue
		}
		bytes += results[i].Bytes
	}
	if o.json {
		if err := g.printJSON(results); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "wrote %d of %d tasks (%s) to %s/<index>\n", n-len(missing), n, humanBytes(uint64(bytes)), abs)
	}
	if count := len(missing); count > 0 {
		const show = 10
		more := ""
		if count > show {
			more = fmt.Sprintf(" and %d more", count-show)
			missing = missing[:show]
		}
		return fmt.Errorf("%d tasks not written: %s%s", count, strings.Join(missing, "; "), more)
	}
	return nil
}

type resumeOptions struct {
	wait      bool
	json      bool
	outDir    string
	fromStart bool
	secrets   []string
}

func newResumeCommand(g *globalOptions) *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume JOB [--wait] [--from-start]",
		Short: "Run JOB again from its last checkpoint, as its next attempt",
		Long: `resume submits JOB's next attempt: its declaration again, with its last
checkpoint laid out at its checkpoint path, writable, as the job left it, and
E31_RESUME_FROM naming that path, so the work picks up where the checkpoint
left it, on whichever provider is free. The job keeps its ID: e31 status JOB
lists its attempts, and e31 wait, logs -f and get follow the last.

With --from-start, it submits JOB's declaration as it was first submitted, to
run again from the beginning: a job that declares no checkpoints, or ended
before its first, after its provider was lost, say.

A job's secrets are kept by the daemon until the job has ended for good, so
an automatic resumption or retry gets them; resuming by hand after that,
give each again with --secret.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			secrets, err := resumeSecrets(o.secrets)
			if err != nil {
				return err
			}
			job, err := g.client().Submit(ctx, api.SubmitRequest{ResumeOf: args[0], FromStart: o.fromStart, Secrets: secrets}, nil)
			if err != nil {
				return err
			}
			if o.wait {
				return followJob(ctx, g, job.ID, followOptions{json: o.json, outDir: o.outDir, poll: defaultPoll})
			}
			if o.json {
				return g.printJSON(job)
			}
			writef(g.stdout, "%s\n", job.ID)
			if n := len(job.Attempts); n > 1 {
				writef(g.stderr, "attempt %d (%s) from %s\n", n, job.Attempts[n-1].ID, startedFrom(job.Attempts[n-1]))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "follow the job to its end")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (at least id)")
	cmd.Flags().StringVarP(&o.outDir, "output", "o", "", "with --wait: where to write the output")
	cmd.Flags().BoolVar(&o.fromStart, "from-start", false, "run JOB again from the beginning, not from its last checkpoint")
	cmd.Flags().StringArrayVar(&o.secrets, "secret", nil, "NAME[=env:VAR|file:PATH]: the value of JOB's secret NAME, given again; the daemon drops a job's once it has ended (repeatable)")
	return cmd
}
