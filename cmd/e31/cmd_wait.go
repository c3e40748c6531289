package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

// Exit statuses of e31 wait, worst last: a script tells from the status
// alone whether to look at its jobs, resubmit, or blame the network.
const (
	waitCompleted = 0 // every job completed
	waitJobFailed = 1 // a job failed or ran out of its limit: its own doing
	waitNoRun     = 4 // a job was withdrawn or rejected
	waitNotJob    = 5 // a job ended by the fault of a provider, the network or this node
	waitTimedOut  = 6 // --timeout passed with a job not ended
)

// exitCoder is an error that sets the command's exit status.
type exitCoder interface{ ExitCode() int }

// waitError is e31 wait's failure: the worst status and what caused it.
type waitError struct {
	code int
	msg  string
}

func (e *waitError) Error() string { return e.msg }
func (e *waitError) ExitCode() int { return e.code }

type waitOptions struct {
	any     bool
	json    bool
	quiet   bool
	timeout time.Duration
	poll    time.Duration
	// retryFor is how long a daemon that stopped answering is asked
	// again (--retry-for).
	retryFor time.Duration
}

func newWaitCommand(g *globalOptions) *cobra.Command {
	var o waitOptions
	var sel jobSelection
	cmd := &cobra.Command{
		Use:   "wait JOB...|--label K=V|--name GLOB [--any] [--timeout D]",
		Short: "Wait until jobs end; the exit status says how the worst one ended",
		Long: `wait follows the named jobs of this node until every one has ended (with
--any, until the first has), printing a line as each ends. Its exit status
is that of the worst ending:

  0  every job completed
  1  a job failed or reached its limit (its own doing)
  4  a job was withdrawn or rejected
  5  a job ended by the fault of its provider, the network or this node
     (provider-lost, output-lost, ...): resubmitting it may succeed
  6  --timeout passed before the jobs ended (they go on)
  3  no daemon to ask (none answered for --retry-for)

A restart of the daemon does not end the wait: while the daemon does not
answer, wait says so on stderr and asks again for up to --retry-for, then
goes on where it was. Stopping wait stops only the waiting.`,
		Example: `  e31 wait $JOB1 $JOB2 && echo all completed
  e31 wait --label pipeline=nightly        # every job of a pipeline file
  e31 wait --any $(e31 list --state queued,running --json | jq -r '.[].id')`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []string
			err := g.reconnect(o.retryFor, o.poll, o.quiet).Do(cmd.Context(), func(ctx context.Context) (err error) {
				ids, err = selectTargets(ctx, g, args, sel, false)
				return err
			})
			if err != nil {
				return err
			}
			return waitJobs(cmd.Context(), g, ids, o)
		},
	}
	f := cmd.Flags()
	sel.addFlags(f, "wait for")
	f.BoolVar(&o.any, "any", false, "return when the first job ends, with its status")
	f.BoolVar(&o.json, "json", false, "print the ended jobs as JSON")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing; only the exit status tells")
	f.DurationVar(&o.timeout, "timeout", 0, "give up after this long (exit status 6); 0: wait as long as it takes")
	f.DurationVar(&o.poll, "poll", time.Second, "how often the jobs are asked about")
	addRetryFor(f, &o.retryFor)
	return cmd
}

// waitJobs asks the daemon for its jobs every o.poll until those named have
// ended, or one has with o.any.
func waitJobs(ctx context.Context, g *globalOptions, ids []string, o waitOptions) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if o.poll <= 0 {
		o.poll = time.Second
	}
	cl := g.client()
	rc := g.reconnect(o.retryFor, o.poll, o.quiet)
	// Full IDs first: a prefix, or an ID not in the list, is resolved (or
	// refused, naming it) by asking for the one job.
	pending := make(map[string]bool, len(ids))
	var order []string
	for _, id := range ids {
		var j api.Job
		err := rc.Do(ctx, func(ctx context.Context) (err error) {
			j, err = cl.Job(ctx, id)
			return err
		})
		if err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		if !pending[j.ID] {
			pending[j.ID] = true
			order = append(order, j.ID)
		}
	}
	var ended []api.Job
	worst, why := waitCompleted, ""
	for {
		var jobs []api.Job
		err := rc.Do(ctx, func(ctx context.Context) (err error) {
			jobs, err = cl.Jobs(ctx)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		for _, j := range jobs {
			if !pending[j.ID] || !j.State.Terminal() {
				continue
			}
			delete(pending, j.ID)
			ended = append(ended, j)
			code := endingExit(j)
			if code > worst {
				worst, why = code, fmt.Sprintf("job %s ended %s", j.ID, ending(j))
			}
			if !o.quiet && !o.json {
				writef(g.stdout, "%s  %s  %s\n", j.ID, j.Name, summary(j))
			}
		}
		if len(pending) == 0 || o.any && len(ended) > 0 {
			break
		}
		t := time.NewTimer(o.poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	if o.json {
		if err := g.printJSON(ended); err != nil {
			return err
		}
	}
	if len(pending) > 0 && !(o.any && len(ended) > 0) {
		var left []string
		for _, id := range order {
			if pending[id] {
				left = append(left, id)
			}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &waitError{code: waitTimedOut, msg: fmt.Sprintf("--timeout %s passed; %d jobs not ended (they go on): %s", o.timeout, len(left), strings.Join(left, " "))}
		}
		return fmt.Errorf("stopped waiting; %d jobs not ended (they go on): %s: %w", len(left), strings.Join(left, " "), ctx.Err())
	}
	if o.any && len(ended) > 0 {
		worst, why = endingExit(ended[0]), fmt.Sprintf("job %s ended %s", ended[0].ID, ending(ended[0]))
	}
	if worst != waitCompleted {
		return &waitError{code: worst, msg: why}
	}
	return nil
}

// endingExit is e31 wait's exit status for an ended job.
func endingExit(j api.Job) int {
	switch {
	case j.Outcome == "completed":
		return waitCompleted
	case j.State == api.JobRejected || j.State == api.JobWithdrawn || j.Outcome == "withdrawn":
		return waitNoRun
	case j.Attribution == "job":
		return waitJobFailed
	}
	return waitNotJob
}

// ending says how a job ended: its outcome and to whom it is attributed.
func ending(j api.Job) string {
	if j.Outcome == "" {
		return string(j.State)
	}
	if j.Attribution == "" || j.Outcome == "completed" {
		return j.Outcome
	}
	return j.Outcome + " (attributed to " + j.Attribution + ")"
}

// summary is an ended job in one line: how it ended, how long it ran, its
// output.
func summary(j api.Job) string {
	parts := []string{ending(j)}
	if j.ExitCode != nil && *j.ExitCode != 0 {
		parts = append(parts, fmt.Sprintf("exit code %d", *j.ExitCode))
	}
	if n := len(j.Attempts); n > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", n))
	}
	if d, ok := runTime(j); ok {
		parts = append(parts, "ran "+d.Round(time.Millisecond).String())
		if n := len(j.GPUs); n > 0 && j.Held == nil {
			parts = append(parts, fmt.Sprintf("%.3f GPU-h", d.Hours()*float64(n)))
		}
	}
	if j.Held != nil && j.Held.GPUHours > 0 {
		parts = append(parts, fmt.Sprintf("%.3f GPU-h held", j.Held.GPUHours))
	}
	if j.Output != "" {
		parts = append(parts, "output "+j.Output)
	}
	return strings.Join(parts, ", ")
}

// runTime is how long the job's run step lasted: from its start to the
// step after it, or to now while it runs.
func runTime(j api.Job) (time.Duration, bool) {
	for i, s := range j.Steps {
		if s.Step != api.StepRun {
			continue
		}
		if i+1 < len(j.Steps) {
			return j.Steps[i+1].At.Sub(s.At), true
		}
		if !j.State.Terminal() {
			return time.Since(s.At), true
		}
		return 0, false
	}
	return 0, false
}
