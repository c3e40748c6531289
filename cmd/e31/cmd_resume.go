package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

type resumeOptions struct {
	wait      bool
	json      bool
	outDir    string
	fromStart bool
	secrets   []string
	failed    bool
	indices   string
	with      string
	image     string
	inputs    []string
}

func newResumeCommand(g *globalOptions) *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume JOB|ARRAY [--failed | --indices LIST] [--with FILE | --image REF | --input SRC:MOUNT...] [--wait] [--from-start]",
		Short: "Run JOB again from its last checkpoint, as its next attempt; or an array's failed tasks, with changed work",
		Long: `resume submits JOB's next attempt: its declaration again, with its last
checkpoint laid out at its checkpoint path, writable, as the job left it, and
E31_RESUME_FROM naming that path, so the work picks up where the checkpoint
left it, on whichever provider is free. The job keeps its ID: e31 status JOB
lists its attempts, and e31 wait, logs -f and get follow the last.

With --from-start, it submits JOB's declaration as it was first submitted, to
run again from the beginning: a job that declares no checkpoints, or ended
before its first, after its provider was lost, say.

Of an ARRAY it runs again the tasks that failed (--failed, the default), or
those --indices names (7,40,73 or ranges, 0-9,40: tasks that ended, however
they ended), each as the next attempt of the same task: it keeps its index,
its ID ARRAY.N and its earlier attempts, which e31 status ARRAY.N lists and
whose held time its bill sums. A task named alone (e31 resume ARRAY.7) is
its array's with --indices 7.

The work may change, for a bug that would fail again as signed:
  --with FILE     a declaration in submit's format; of an array, one with the
                  same array count (its values replace the tasks'), or with
                  no array (each task keeps its index, count and value)
  --image REF     the job's own declaration in another image
  --input SRC:MOUNT  the job's own declaration with the input at MOUNT
                  replaced (or added); repeatable
Each new attempt is its own declaration, signed by this node and announced
as the resumption of the attempt before, as any resumption is; the array
keeps its ID and the declaration it was submitted with. A new attempt starts
from its task's last checkpoint where the new work declares checkpoints
(unless --from-start), else from the beginning. A new declaration may not
be a gang, wait for other jobs (after), or name secrets the job does not.

A job's secrets are kept by the daemon until the job has ended for good, so
an automatic resumption or retry gets them; resuming by hand after that,
give each again with --secret.`,
		Example: `  e31 resume rjwh4k2
  e31 resume rjwh4k2 --failed --with fixed.yaml --wait -o results
  e31 resume rjwh4k2 --indices 7,40,73 --image docker-archive:./fixed.tar.gz
  e31 resume rjwh4k2.7 --input ./train.py:/code/train.py`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runResume(cmd.Context(), o, g, args[0])
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.wait, "wait", false, "follow the job to its end; of an array, write its tasks' outputs as e31 get does")
	f.BoolVar(&o.json, "json", false, "print JSON (at least id)")
	f.StringVarP(&o.outDir, "output", "o", "", "with --wait: where to write the output (default ./<job>-out)")
	f.BoolVar(&o.fromStart, "from-start", false, "run JOB again from the beginning, not from its last checkpoint")
	f.StringArrayVar(&o.secrets, "secret", nil, "NAME[=env:VAR|file:PATH]: the value of JOB's secret NAME, given again; the daemon drops a job's once it has ended (repeatable)")
	f.BoolVar(&o.failed, "failed", false, "of an array: run again the tasks that failed (the default)")
	f.StringVar(&o.indices, "indices", "", "of an array: the tasks to run again, by index: 7,40,73 or ranges, 0-9,40")
	f.StringVar(&o.with, "with", "", "FILE: run this declaration (submit's format) instead of the job's own")
	f.StringVar(&o.image, "image", "", "run the job's own declaration in this image instead (a reference as submit --image takes)")
	f.StringArrayVar(&o.inputs, "input", nil, "SRC:MOUNT: run the job's own declaration with this input at MOUNT, in place of the one there (repeatable)")
	return cmd
}

// runResume asks the daemon for the next attempts of a job, or of an
// array's tasks, and follows them with --wait.
func runResume(ctx context.Context, o resumeOptions, g *globalOptions, id string) error {
	req, err := resumeRequest(o, id)
	if err != nil {
		return err
	}
	cl := g.client()
	var chosen []int
	if len(req.Tasks) > 0 {
		chosen = req.Tasks
	} else if j, err := cl.Job(ctx, id); err == nil && j.Tasks != nil {
		chosen = j.Tasks.FailedIndices
	}
	job, err := cl.Submit(ctx, req, nil)
	if err != nil {
		return err
	}
	if o.wait {
		return followAndGet(ctx, g, job.ID, followOptions{json: o.json, outDir: o.outDir, poll: defaultPoll, retryFor: api.DefaultReconnectFor})
	}
	if o.json {
		return g.printJSON(job)
	}
	writef(g.stdout, "%s\n", job.ID)
	switch n := len(job.Attempts); {
	case job.Tasks != nil && len(chosen) > 0:
		writef(g.stderr, "tasks %s of array %s run again, each as its next attempt%s\n", market.FormatIndexList(chosen), arrayID(job), workSaid(o))
	case job.Tasks != nil:
		writef(g.stderr, "tasks of array %s run again%s\n", arrayID(job), workSaid(o))
	case n > 1:
		writef(g.stderr, "attempt %d (%s) from %s%s\n", n, job.Attempts[n-1].ID, startedFrom(job.Attempts[n-1]), workSaid(o))
	}
	return nil
}

// resumeRequest is the request runResume sends: the new work read and
// its local paths made absolute, here, where they are read from.
func resumeRequest(o resumeOptions, id string) (api.SubmitRequest, error) {
	secrets, err := resumeSecrets(o.secrets)
	if err != nil {
		return api.SubmitRequest{}, err
	}
	req := api.SubmitRequest{ResumeOf: id, FromStart: o.fromStart, Secrets: secrets}
	if o.failed && o.indices != "" {
		return req, errors.New("--failed and --indices: give one (--failed is the default)")
	}
	if o.indices != "" {
		// Checked against the array's size by the daemon, which names it.
		if req.Tasks, err = market.ParseIndexList(o.indices); err != nil {
			return req, fmt.Errorf("--indices: %w", err)
		}
		slices.Sort(req.Tasks)
	}
	if o.with != "" {
		if o.image != "" || len(o.inputs) > 0 {
			return req, errors.New("--with FILE gives the work in full: set its image and inputs in the file, not with --image or --input")
		}
		d, err := declarationFromFile(o.with)
		if err != nil {
			return req, fmt.Errorf("--with: %w", err)
		}
		if req.Declaration, err = json.Marshal(d); err != nil {
			return req, err
		}
		return req, nil
	}
	if o.image == "" && len(o.inputs) == 0 {
		return req, nil
	}
	if h := refHint(o.image, "."); h != "" {
		return req, fmt.Errorf("--image %q: %s", o.image, h)
	}
	d := market.Declaration{Work: market.Work{Image: o.image}}
	for _, in := range o.inputs {
		i := strings.LastIndex(in, ":")
		if i <= 0 || i == len(in)-1 {
			return req, fmt.Errorf("--input %q: want SRC:MOUNT, e.g. ./data:/data", in)
		}
		d.Data = append(d.Data, market.Input{Source: in[:i], Mount: cleanJobPath(in[i+1:])})
	}
	cwd, err := os.Getwd()
	if err != nil {
		return req, err
	}
	if err := absSources(&d, cwd); err != nil {
		return req, err
	}
	req.Image, req.Data = d.Work.Image, d.Data
	return req, nil
}

// workSaid says what work the new attempts run, where it changed.
func workSaid(o resumeOptions) string {
	switch {
	case o.with != "":
		return ", with " + o.with
	case o.image != "" && len(o.inputs) > 0:
		return ", in image " + o.image + " with new inputs"
	case o.image != "":
		return ", in image " + o.image
	case len(o.inputs) > 0:
		return ", with new inputs"
	}
	return ""
}
