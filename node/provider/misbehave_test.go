package provider

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/exec"
)

// countingRunner counts its runs, each completing.
type countingRunner struct{ runs int }

func (r *countingRunner) Run(context.Context, exec.Spec) (exec.Result, error) {
	r.runs++
	return exec.Result{Outcome: exec.Completed}, nil
}

func (r *countingRunner) Cleanup(context.Context, string, string) error     { return nil }
func (r *countingRunner) Sweep(context.Context, func(id string) bool) error { return nil }

// workless misbehaves by the two hooks runSandbox asks.
type workless struct {
	work    bool
	outputs []string
}

func (workless) Propose(string) bool         { return true }
func (workless) Announce(string) bool        { return true }
func (workless) Run(string) bool             { return true }
func (workless) Receipts() bool              { return true }
func (workless) Silent() bool                { return false }
func (workless) Model(real string) string    { return real }
func (w *workless) Work(string) bool         { return w.work }
func (w *workless) Output(_, d string) error { w.outputs = append(w.outputs, d); return nil }

func TestRunSandboxMisbehaves(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	spec := exec.Spec{ID: "l1", Output: exec.Mount{Source: out}}

	r := &countingRunner{}
	if _, err := runSandbox(context.Background(), Deps{Runner: r, Log: slog.New(slog.DiscardHandler)}, spec); err != nil || r.runs != 1 {
		t.Fatalf("honest: %d runs, %v", r.runs, err)
	}

	w := &workless{work: false}
	r = &countingRunner{}
	res, err := runSandbox(context.Background(), Deps{Runner: r, Misbehave: w, Log: slog.New(slog.DiscardHandler)}, spec)
	if err != nil || r.runs != 0 || res.Outcome != exec.Completed || res.ExitCode != 0 {
		t.Fatalf("no-work: %d runs, %+v, %v; want none, completed, exit 0", r.runs, res, err)
	}
	if entries, err := os.ReadDir(out); err != nil || len(entries) != 0 {
		t.Fatalf("no-work output: %v, %v; want an empty folder", entries, err)
	}

	w = &workless{work: true}
	r = &countingRunner{}
	if _, err := runSandbox(context.Background(), Deps{Runner: r, Misbehave: w, Log: slog.New(slog.DiscardHandler)}, spec); err != nil || r.runs != 1 || len(w.outputs) != 1 || w.outputs[0] != out {
		t.Fatalf("output hook: %d runs, outputs %v, %v", r.runs, w.outputs, err)
	}
}
