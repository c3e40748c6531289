package provider

import (
	"context"
	"os"

	"github.com/e31network/e31/exec"
)

// runSandbox runs spec in d's sandbox, as a misbehaving provider
// (Deps.Misbehave) would where it is one: without running the command at
// all, or changing the output after the run.
func runSandbox(ctx context.Context, d Deps, spec exec.Spec) (exec.Result, error) {
	mb := d.Misbehave
	if mb != nil && !mb.Work(spec.ID) {
		d.Log.Warn("misbehaving: the job's command is not run, its output left empty", "lease", spec.ID)
		if err := os.MkdirAll(spec.Output.Source, 0o755); err != nil {
			return exec.Result{}, err
		}
		return exec.Result{Outcome: exec.Completed}, nil
	}
	res, err := d.Runner.Run(ctx, spec)
	if err == nil && mb != nil {
		if err := mb.Output(spec.ID, spec.Output.Source); err != nil {
			d.Log.Warn("misbehaving: output not changed", "lease", spec.ID, "err", err)
		}
	}
	return res, err
}
