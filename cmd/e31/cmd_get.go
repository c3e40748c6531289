package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p/peertext"
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
// few tasks at a time; it notes the tasks withdrawn on purpose, which it
// skips, and fails naming those that failed (whose output and logs it
// writes all the same, where they have some) or whose output is missing.
func getArray(ctx context.Context, o getOptions, g *globalOptions, j api.Job) error {
	w, err := writeArray(ctx, o, g, j)
	if err != nil {
		return err
	}
	if o.json {
		if err := g.printJSON(w.results); err != nil {
			return err
		}
	} else {
		writef(g.stdout, "%s\n", w.summary())
	}
	w.noteWithdrawn(g.stderr)
	return w.err()
}

// arrayWritten is what writeArray wrote of an array's tasks' outputs.
type arrayWritten struct {
	dir       string
	total     int
	results   []api.GetResult // by index; zero for a task not written
	bytes     int64
	withdrawn []string // "INDEX (why)": withdrawn on purpose, skipped
	missing   []string // "INDEX (why)": failed, or no output to write
	failed    []int    // written, but failed
}

// writeArray writes each task's output of the array j at DIR/<index>/out
// (DIR default ./<array>-out), a few tasks at a time, with a bar on a
// terminal unless o.json; a task it could not write is asked how it
// ended, to tell one withdrawn on purpose from one that failed.
func writeArray(ctx context.Context, o getOptions, g *globalOptions, j api.Job) (arrayWritten, error) {
	dir := o.dir
	if dir == "" {
		dir = j.ID + "-out"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return arrayWritten{}, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return arrayWritten{}, fmt.Errorf("-o %s: %w", dir, err)
	}
	cl := g.client()
	n := j.Tasks.Total
	w := arrayWritten{dir: abs, total: n, results: make([]api.GetResult, n)}
	errs := make([]error, n)
	bar := newTaskBar(g.stderr, n, o.json)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, 8) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				id := market.TaskID(arrayID(j), j.Tasks.Index(i))
				w.results[i], errs[i] = cl.Get(ctx, id, api.GetRequest{Dir: filepath.Join(abs, strconv.Itoa(j.Tasks.Index(i))), Checkpoint: o.checkpoint, Attempt: o.attempt})
				bar.add()
			}
		})
	}
	wg.Wait()
	bar.finish()
	if err := ctx.Err(); err != nil {
		return arrayWritten{}, err
	}
	for i, err := range errs {
		index := j.Tasks.Index(i)
		if err == nil {
			w.bytes += w.results[i].Bytes
			if slices.Contains(j.Tasks.FailedIndices, index) {
				w.failed = append(w.failed, index)
			}
			continue
		}
		t, terr := cl.Job(ctx, market.TaskID(arrayID(j), index))
		if terr == nil && withdrawnOnPurpose(t) {
			w.withdrawn = append(w.withdrawn, fmt.Sprintf("%d (%s)", index, withdrawnWhy(t)))
			continue
		}
		w.missing = append(w.missing, fmt.Sprintf("%d (%v)", index, firstLine(err.Error())))
	}
	return w, nil
}

// withdrawnOnPurpose reports whether a task was withdrawn (by its
// submitter, or its array's), not failed: it has nothing to write, and
// nothing is wrong.
func withdrawnOnPurpose(t api.Job) bool {
	return t.State == api.JobWithdrawn || t.Outcome == "withdrawn"
}

// withdrawnWhy says why a task was withdrawn, as far as its job says.
func withdrawnWhy(t api.Job) string {
	switch {
	case t.Reason != "":
		return firstLine(peertext.Escape(t.Reason))
	case t.Attribution != "":
		return "withdrawn, attributed to " + t.Attribution
	}
	return "withdrawn"
}

// summary is the line that says what was written.
func (w arrayWritten) summary() string {
	s := fmt.Sprintf("wrote %d of %d tasks (%s) to %s/<index>", w.total-len(w.missing)-len(w.withdrawn), w.total, humanBytes(uint64(w.bytes)), w.dir)
	if n := len(w.withdrawn); n > 0 {
		s += fmt.Sprintf("; %d withdrawn, skipped", n)
	}
	return s
}

// noteWithdrawn names the tasks skipped as withdrawn, and why.
func (w arrayWritten) noteWithdrawn(out io.Writer) {
	if len(w.withdrawn) > 0 {
		writef(out, "skipped %d tasks withdrawn on purpose: %s\n", len(w.withdrawn), listSome(w.withdrawn))
	}
}

// err names the tasks that failed or whose output is missing; nil if
// none.
func (w arrayWritten) err() error {
	var errs []string
	if len(w.missing) > 0 {
		errs = append(errs, fmt.Sprintf("%d tasks not written: %s", len(w.missing), listSome(w.missing)))
	}
	if len(w.failed) > 0 {
		errs = append(errs, fmt.Sprintf("tasks %s failed (what they returned is written all the same, logs included)", market.FormatIndexList(w.failed)))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// listSome is the first ten of items, and how many more.
func listSome(items []string) string {
	const show = 10
	if len(items) <= show {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:show], "; "), len(items)-show)
}

// followAndGet follows a job to its end (followJob), and of an array,
// writes its tasks' outputs as e31 get does, where followJob writes a
// job's: at o.outDir, default ./<array>-out. The array's ending, when it
// did not complete, is the error; the tasks not written are noted.
func followAndGet(ctx context.Context, g *globalOptions, id string, o followOptions) error {
	ferr := followJob(ctx, g, id, o)
	if ctx.Err() != nil {
		return ferr
	}
	j, err := g.client().Job(ctx, id)
	if err != nil || j.Tasks == nil || !j.State.Terminal() || j.Tasks.Completed == 0 {
		return ferr
	}
	w, err := writeArray(ctx, getOptions{dir: o.outDir, json: o.json}, g, j)
	if err != nil {
		return errors.Join(ferr, err)
	}
	if !o.json {
		writef(g.stderr, "%s\n", w.summary())
	}
	w.noteWithdrawn(g.stderr)
	werr := w.err()
	if ferr != nil && werr != nil {
		writef(g.stderr, "e31: %v\n", werr)
		return ferr
	}
	return errors.Join(ferr, werr)
}
