package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/market"
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
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (id, state, outcome, attribution, provider, steps, exit_code, output, checkpoint, gpus, reason, attempts, held)")
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
	writef(tw, "job\t%s (%s)\n", j.ID, j.Name)
	if j.Root != "" {
		writef(tw, "attempt of\t%s (e31 status %s shows the whole job)\n", j.Root, j.Root)
	}
	if j.ResumeOf != "" {
		writef(tw, "resumes\t%s\n", j.ResumeOf)
	}
	if len(j.Labels) > 0 {
		var kvs []string
		for k, v := range j.Labels {
			kvs = append(kvs, k+"="+v)
		}
		slices.Sort(kvs)
		writef(tw, "labels\t%s\n", strings.Join(kvs, ", "))
	}
	if j.Array != "" {
		writef(tw, "task\t%d of array %s\n", j.Index, j.Array)
	}
	writef(tw, "state\t%s\n", j.State)
	if j.Market != "" {
		writef(tw, "market\t%s\n", j.Market)
	}
	for _, p := range j.Parts {
		writef(tw, "part %d\t%s on %s%s\n", p.Rank, p.State, orDash(p.Provider), outcomeOf(p.Outcome))
	}
	if t := j.Tasks; t != nil && len(j.Parts) == 0 {
		writef(tw, "tasks\t%s\n", describeTasks(t))
		if len(t.FailedIndices) > 0 {
			writef(tw, "failed tasks\t%s\n", market.FormatIndexList(t.FailedIndices))
		}
	}
	if v := j.Verification; v != nil {
		writef(tw, "verification\t%s, %s: %s\n", v.Mode, v.State, v.Reason)
		for i, r := range v.Replicas {
			lost := ""
			if r.Lost {
				lost = ", LOST"
			}
			writef(tw, "replica %d\t%s on %s%s %s%s\n", i+1, r.State, orDash(r.Provider), outcomeOf(r.Outcome), orDash(r.Compared), lost)
		}
		if len(v.Caught) > 0 {
			writef(tw, "caught\t%s (%d tasks run again)\n", strings.Join(v.Caught, ", "), v.Rerun)
		}
	}
	if j.Reason != "" {
		writef(tw, "reason\t%s\n", j.Reason)
	}
	switch {
	case j.Outcome != "" && j.Attribution != "":
		writef(tw, "outcome\t%s (attributed to %s)\n", j.Outcome, j.Attribution)
	case j.Outcome != "":
		writef(tw, "outcome\t%s\n", j.Outcome)
	}
	if j.ExitCode != nil {
		writef(tw, "exit code\t%d\n", *j.ExitCode)
	}
	if d, ok := runTime(j); ok {
		line := d.Round(time.Millisecond).String()
		if !j.State.Terminal() {
			line += " so far"
		}
		if n := len(j.GPUs); n > 0 {
			line += fmt.Sprintf(" on %d GPUs, %.3f GPU-h", n, d.Hours()*float64(n))
		}
		writef(tw, "run time\t%s\n", line)
	}
	if j.Provider != "" {
		writef(tw, "provider\t%s\n", j.Provider)
		writef(tw, "lease\t%s\n", j.Lease)
		if j.Price != 0 {
			writef(tw, "price\t%s per GPU-hour (signed in the lease)\n", j.Price)
		}
		writef(tw, "gpus\t%s\n", strings.Join(j.GPUs, ", "))
	}
	if j.DataRelay != "" {
		writef(tw, "data moved\tthrough relay %s (the final receipt says so)\n", j.DataRelay)
	}
	staging := ""
	if j.StagingRate > 0 {
		staging = fmt.Sprintf(", staging at %.1f MiB/s", j.StagingRate/(1<<20))
	}
	switch j.Path {
	case "":
	case "relayed-data":
		writef(tw, "data path\tthrough relay %s (no direct connection to the provider)%s\n", j.PathVia, staging)
	case "relayed":
		writef(tw, "data path\tnone yet: only a relay reaches the provider, waiting for a hole punch\n")
	default:
		writef(tw, "data path\t%s%s\n", j.Path, staging)
	}
	for _, s := range j.GPUsSeen {
		writef(tw, "gpu seen by the run\t%s (%s)\n", s.UUID, s.Model)
	}
	if j.GPUMismatch != "" {
		writef(tw, "GPU MISMATCH\t%s\n", j.GPUMismatch)
	}
	if j.Output != "" {
		writef(tw, "output\t%s\n", j.Output)
	}
	if j.Checkpoint != "" {
		writef(tw, "checkpoint\t%s\n", j.Checkpoint)
	}
	if j.ProviderKeepsUntil != nil {
		writef(tw, "provider keeps until\t%s (this node keeps its copy until removed)\n", j.ProviderKeepsUntil.Local().Format(time.RFC3339))
	}
	for _, s := range j.Skipped {
		writef(tw, "left out of output\t%s\n", s)
	}
	if h := j.Held; h != nil && len(h.Providers) > 0 {
		held := time.Duration(h.HeldMs) * time.Millisecond
		line := fmt.Sprintf("%s on %d provider%s, %.3f GPU-h, owed %.3f, not owed %.3f", held.Round(time.Second), len(h.Providers), plural(len(h.Providers)),
			h.GPUHours, h.OwedGPUHours, h.GPUHours-h.OwedGPUHours)
		if h.OneSidedGPUHours > 0 {
			line += fmt.Sprintf(" (%.3f on this node's word alone)", h.OneSidedGPUHours)
		}
		if h.VerificationGPUHours > 0 {
			line += fmt.Sprintf("; checking the results held %.3f of it", h.VerificationGPUHours)
		}
		if h.CPUHours > 0 {
			line += fmt.Sprintf("; %.3f CPU-h, owed %.3f", h.CPUHours, h.OwedCPUHours)
		}
		writef(tw, "held\t%s\n", line)
	}
	for _, s := range j.Steps {
		writef(tw, "step %s\t%s\n", s.Step, s.At.Local().Format(time.RFC3339Nano))
	}
	if len(j.Attempts) > 1 {
		for _, a := range j.Attempts {
			writef(tw, "attempt %d\t%s\n", a.N, describeAttempt(a))
		}
	}
	tw.Flush()
}

// describeTasks is one line on an array's tasks: "10 tasks: 7 completed,
// 2 running, 1 queued", naming only the states some task is in.
func describeTasks(t *api.TaskCounts) string {
	parts := []string{}
	for _, c := range []struct {
		n    int
		what string
	}{{t.Completed, "completed"}, {t.Running, "running"}, {t.Queued, "queued"}, {t.Failed, "failed"}, {t.Withdrawn, "withdrawn"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return fmt.Sprintf("%d tasks: %s", t.Total, strings.Join(parts, ", "))
}

// describeAttempt is one line on an attempt of a job: its ID, provider,
// when it held it, how it ended and where it started from.
func describeAttempt(a api.Attempt) string {
	parts := []string{a.ID}
	if a.Provider != "" {
		parts = append(parts, "on "+shortID(a.Provider))
	}
	if a.From != nil {
		span := a.From.Local().Format(time.TimeOnly) + "–"
		if a.To != nil {
			span += a.To.Local().Format(time.TimeOnly)
		}
		parts = append(parts, span)
	}
	switch {
	case a.Outcome != "" && a.Outcome != "completed" && a.Reason != "":
		parts = append(parts, a.Outcome+" ("+a.Attribution+": "+firstLine(a.Reason)+")")
	case a.Outcome != "":
		parts = append(parts, a.Outcome+" ("+a.Attribution+")")
	default:
		parts = append(parts, string(a.State))
	}
	parts = append(parts, "from "+startedFrom(a))
	return strings.Join(parts, ", ")
}

// shortID is the end of a peer ID, enough to tell providers apart.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-8:]
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

type listOptions struct {
	json bool
	sel  jobSelection
}

func newListCommand(g *globalOptions) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list [--state S] [--name GLOB] [--label K=V] [--since D]",
		Short: "List the jobs submitted from this node",
		Example: `  e31 list --state queued,running
  e31 list --name 'sweep-*' --since 2h --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			match, err := o.sel.matcher(time.Now())
			if err != nil {
				return err
			}
			all, err := g.client().Jobs(cmd.Context())
			if err != nil {
				return err
			}
			jobs := []api.Job{}
			for _, j := range all {
				if match(j) {
					jobs = append(jobs, j)
				}
			}
			if o.json {
				return g.printJSON(jobs)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tNAME\tSTATE\tOUTCOME\tSUBMITTED")
			for _, j := range jobs {
				state := string(j.State)
				if t := j.Tasks; t != nil {
					state += " (" + tasksEnded(t) + ")"
				}
				writef(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, state, j.Outcome, j.Submitted.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	o.sel.addFlags(cmd.Flags(), "list")
	return cmd
}

func newWithdrawCommand(g *globalOptions) *cobra.Command {
	var (
		asJSON bool
		sel    jobSelection
		tasks  string
	)
	cmd := &cobra.Command{
		Use:   "withdraw JOB... | withdraw ARRAY --tasks 5-9 | withdraw [--name GLOB] [--label K=V] [--state S] [--since D]",
		Short: "Withdraw jobs: a queued one owes nothing; a running one is stopped and released",
		Long: `withdraw takes jobs back: those named, or every job of this node that has
not ended and matches --name, --label, --state and --since. A queued job ends at
once, with no lease and no receipt. A leased job gets SIGTERM and its grace
period to write a last checkpoint, then goes through release with outcome
"withdrawn". Each job is tried even when another fails; the command fails
if any did.`,
		Example: `  e31 withdraw 5f2c… 9ab1…
  e31 withdraw --name 'sweep-*' --state queued
  e31 withdraw --label sweep=lr
  e31 withdraw SWEEP --tasks 5-9`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := withdrawTargets(cmd.Context(), g, args, sel)
			if err != nil {
				return err
			}
			if tasks != "" {
				if len(ids) != 1 || len(args) != 1 {
					return errors.New("--tasks names tasks of one array: e31 withdraw ARRAY --tasks 5-9")
				}
				if ids, err = taskIDs(cmd.Context(), g, ids[0], tasks); err != nil {
					return err
				}
			}
			var done []api.Job
			var failed []string
			for _, id := range ids {
				j, err := g.client().Withdraw(cmd.Context(), id)
				if err != nil {
					failed = append(failed, id)
					writef(g.stderr, "e31: withdraw %s: %v\n", id, err)
					continue
				}
				done = append(done, j)
				if asJSON {
					continue
				}
				if j.State == api.JobWithdrawn {
					writef(g.stdout, "job %s withdrawn; nothing is owed\n", j.ID)
				} else {
					writef(g.stdout, "job %s: its provider is stopping it; it ends released with outcome withdrawn\n", j.ID)
				}
			}
			if asJSON {
				if len(args) == 1 && len(done) == 1 {
					if err := g.printJSON(done[0]); err != nil {
						return err
					}
				} else if err := g.printJSON(done); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d jobs not withdrawn: %s", len(failed), len(ids), strings.Join(failed, " "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the job, or a list when several are withdrawn")
	cmd.Flags().StringVar(&tasks, "tasks", "", "with one array: withdraw only these of its tasks, e.g. 5-9 or 1,3,10-12")
	sel.addFlags(cmd.Flags(), "withdraw")
	return cmd
}

// withdrawTargets is the jobs withdraw takes back: those named, or those
// of the selection that have not ended. Naming jobs and selecting them do
// not mix, and a selection that matches nothing is an error.
func withdrawTargets(ctx context.Context, g *globalOptions, args []string, sel jobSelection) ([]string, error) {
	return selectTargets(ctx, g, args, sel, true)
}

// selectTargets is the jobs a verb acts on: those named, or those of the
// selection (with live, only those that have not ended). Naming jobs and
// selecting them do not mix, and a selection that matches nothing is an
// error.
func selectTargets(ctx context.Context, g *globalOptions, args []string, sel jobSelection, live bool) ([]string, error) {
	switch {
	case len(args) > 0 && sel.set():
		return nil, errors.New("name jobs or select them with --name, --state, --label or --since, not both")
	case len(args) > 0:
		return args, nil
	case !sel.set():
		return nil, errors.New("name at least one job, or select jobs with --name, --state, --label or --since")
	}
	match, err := sel.matcher(time.Now())
	if err != nil {
		return nil, err
	}
	jobs, err := g.client().Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, j := range jobs {
		if (!live || !j.State.Terminal()) && match(j) {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		if live {
			return nil, errors.New("no job of this node that has not ended matches the selection (e31 list shows them)")
		}
		return nil, errors.New("no job of this node matches the selection (e31 list shows them)")
	}
	return ids, nil
}

// firstLine is the first line of a reason, cut to fit on a status line.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	const max = 100
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// outcomeOf is ", OUTCOME" for a part that has ended, else "".
func outcomeOf(o string) string {
	if o == "" {
		return ""
	}
	return ", " + o
}
