package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
)

// A run's end reaches the ledger as the sandbox judged it, and a run the
// sandbox did not end on its own as the lease's context says why it
// stopped.
func TestRunEnding(t *testing.T) {
	spec := exec.Spec{Limit: time.Hour, MemoryBytes: 1 << 30, Disk: &exec.Disk{Bytes: 1 << 30}}
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		res  exec.Result
		err  error
		want ledger.Ending
		exit bool // the ending carries the run's exit code
	}{
		{"completed", nil, exec.Result{Outcome: exec.Completed, Attribution: exec.ByJob}, nil,
			ledger.Ending{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}, true},
		{"job failed", nil, exec.Result{Outcome: exec.Failed, Attribution: exec.ByJob, ExitCode: 3, Reason: "exit status 3"}, nil,
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob, Reason: "exit status 3"}, true},
		{"runtime died", nil, exec.Result{Outcome: exec.Failed, Attribution: exec.ByProvider, ExitCode: -1, Reason: "runtime died: killed"}, nil,
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: "runtime died: killed"}, true},
		{"out of memory", nil, exec.Result{Outcome: exec.Failed, Attribution: exec.ByJob, Reason: exec.ReasonOOM}, nil,
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob, Reason: "out of memory: used all of request.memory 1GiB"}, true},
		{"disk full", nil, exec.Result{Outcome: exec.Failed, Attribution: exec.ByJob, DiskFull: true}, nil,
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob, Reason: "wrote more than request.disk 1GiB"}, true},
		{"limit", nil, exec.Result{Outcome: exec.Limit, Attribution: exec.ByJob}, nil,
			ledger.Ending{Outcome: ledger.OutcomeLimit, Attribution: ledger.AttributionJob, Reason: "limit 1h0m0s reached"}, true},
		{"never started", nil, exec.Result{Outcome: exec.Failed, Attribution: exec.ByProvider}, errors.New("no runtime"),
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: "no runtime"}, false},
		{"withdrawn", cancelled(ErrWithdrawn), exec.Result{Outcome: exec.Stopped, Attribution: exec.ByProvider}, nil,
			ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter, Reason: "withdrawn while running"}, true},
		{"released unrun", cancelled(ErrReleasedUnrun), exec.Result{Outcome: exec.Stopped, Attribution: exec.ByProvider}, nil,
			ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: ErrReleasedUnrun.Error()}, true},
		{"panic", cancelled(errInternal), exec.Result{Outcome: exec.Stopped, Attribution: exec.ByProvider}, nil,
			ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: errInternal.Error()}, true},
		{"provider stopping", cancelled(nil), exec.Result{Outcome: exec.Stopped, Attribution: exec.ByProvider}, nil,
			ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: "provider stopped the run"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got := runEnding(ctx, spec, tc.res, tc.err)
			if tc.exit != (got.ExitCode != nil) || (got.ExitCode != nil && *got.ExitCode != tc.res.ExitCode) {
				t.Errorf("exit code %v, want the run's (%d) %v", got.ExitCode, tc.res.ExitCode, tc.exit)
			}
			got.ExitCode = nil
			if got != tc.want {
				t.Errorf("ending %+v, want %+v", got, tc.want)
			}
		})
	}
}
