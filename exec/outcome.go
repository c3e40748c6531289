package exec

import (
	"context"
	"fmt"
	"syscall"
)

// ending is what Run saw when a started run was over: the exit status,
// the runtime's log, the limit timer, the cgroup's events and the disk.
// classify turns it into a Result's verdict without looking at anything
// else, so each way a run can end is a case in a table test.
type ending struct {
	// started: the runtime started the job's process (it wrote the pid
	// file). A run that never started is the runtime's failure unless
	// the runtime says the job's command or working directory is at
	// fault.
	started bool
	// exit is the runtime process's exit status, 128+n for the job's
	// death by signal n, or -1 when the runtime process was killed.
	exit int
	// processState describes the runtime process's end, for exit < 0.
	processState string
	// runtimeErr is the last error in the runtime's log, or "".
	runtimeErr string
	// stop is why Run stopped the job (Limit or Stopped), or "" when
	// the job ended before anything stopped it.
	stop Outcome
	// signalled: a stop signal reached the job. A stop that found the
	// job already gone leaves the job's own status to speak.
	signalled bool
	// cause is context.Cause of Run's context: for a Stopped run, what
	// the caller gave as its reason.
	cause error
	// oom: the job's cgroup recorded an OOM kill. oomKnown: the host
	// records OOM kills at all; where it does not, hitMemoryLimit (the
	// cgroup reached its memory limit) and a SIGKILL stand in for one.
	oom, oomKnown, hitMemoryLimit bool
	// workDir is Spec.WorkDir, which a runtime error may name.
	workDir string
	// diskFull: the job's Spec.Disk is used up; diskBytes is its quota.
	diskFull  bool
	diskBytes uint64
	// readOnly: the job's stderr ends with a write to a read-only path
	// (readOnlyPath, where it names one); writable says where the job
	// may write, for the hint its reason then carries.
	readOnly     bool
	readOnlyPath string
	writable     string
}

// classify decides how a started run ended: its Outcome, Attribution,
// ExitCode, Reason and DiskFull (the other fields of the Result it
// returns are zero). The error, wrapping ErrRuntime, is for a runtime that
// failed before the job started; the Result is then filled in too. The
// cases are checked in order, and the order matters: a job that never
// started cannot have been signalled, a signal Run sent explains the
// status it caused, and the OOM verdict must not take a clean exit.
func classify(e ending) (Result, error) {
	res := Result{Outcome: Failed, Attribution: ByJob, ExitCode: e.exit}
	switch {
	case !e.started && commandNotRunnable(e.runtimeErr):
		// The runtime could not execute the job's command: a missing or
		// non-executable file, which is the job's to fix.
		res.ExitCode, res.Reason = 127, e.runtimeErr
	case !e.started && workDirNotMade(e.runtimeErr, e.workDir):
		// The job's working directory is missing where nothing may be
		// made: in a read-only input, or in the host's system folders.
		res.ExitCode, res.Reason = -1, fmt.Sprintf("working directory %s: %s", e.workDir, e.runtimeErr)
	case !e.started && e.stop == "":
		reason := e.runtimeErr
		if reason == "" {
			reason = describeExit(e.exit)
		}
		res.Attribution, res.ExitCode, res.Reason = ByProvider, -1, reason
		return res, fmt.Errorf("%w: %s", ErrRuntime, reason)
	case e.signalled:
		res.Outcome, res.Reason = e.stop, describeExit(e.exit)
		if e.stop == Stopped {
			res.Attribution = ByProvider
			if e.cause != nil && e.cause != context.Canceled {
				res.Reason = e.cause.Error() + "; " + res.Reason
			}
		}
	case e.exit < 0:
		// The runtime process itself was killed: the job's status is
		// lost with it.
		res.Attribution, res.Reason = ByProvider, "runtime died: "+e.processState
	case e.exit == 0:
		res.Outcome = Completed
	case e.oom || (!e.oomKnown && e.hitMemoryLimit && e.exit == 128+int(syscall.SIGKILL)):
		res.Reason = ReasonOOM
	case e.runtimeErr != "":
		res.Attribution, res.Reason = ByProvider, e.runtimeErr
	default:
		res.Reason = describeExit(e.exit)
	}
	if e.diskFull && res.Outcome == Failed && res.Attribution == ByJob {
		// Most programs die of ENOSPC with a message of their own; the
		// quota is the cause worth naming.
		res.DiskFull = true
		res.Reason = fmt.Sprintf("disk quota of %d bytes used up (%s)", e.diskBytes, res.Reason)
	}
	if e.readOnly && res.Outcome == Failed && res.Attribution == ByJob && !res.DiskFull && res.Reason != ReasonOOM && e.exit > 0 {
		// The program's own message ("Read-only file system") is in its
		// log; what to change in the declaration is not.
		res.Reason += "; " + readOnlyHint(e.readOnlyPath, e.writable)
	}
	return res, nil
}
