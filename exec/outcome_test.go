package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClassify covers each way a started run can end, without a runtime.
func TestClassify(t *testing.T) {
	const (
		runcExec  = "runc run failed: unable to start container process: exec: \"/nope\": stat /nope: no such file or directory"
		runcMkdir = "runc run failed: mkdir /code/x: read-only file system"
		runcOther = "runc run failed: cgroup: permission denied"
	)
	withdrawn := errors.New("withdrawn by its owner")
	for _, tc := range []struct {
		name    string
		e       ending
		want    Result
		wantErr bool
	}{
		{
			name: "exit 0",
			e:    ending{started: true, exit: 0},
			want: Result{Outcome: Completed, Attribution: ByJob, ExitCode: 0},
		},
		{
			name: "exit 3",
			e:    ending{started: true, exit: 3},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 3, Reason: "exit status 3"},
		},
		{
			name: "killed by its own signal",
			e:    ending{started: true, exit: 128 + 11},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 139, Reason: "signal: segmentation fault"},
		},
		{
			name: "command not runnable",
			e:    ending{exit: 1, runtimeErr: runcExec},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 127, Reason: runcExec},
		},
		{
			name: "command not runnable, crun",
			e:    ending{exit: 1, runtimeErr: "executable file `nope` not found in $PATH"},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 127, Reason: "executable file `nope` not found in $PATH"},
		},
		{
			name: "working directory not made",
			e:    ending{exit: 1, runtimeErr: runcMkdir, workDir: "/code/x"},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: -1, Reason: "working directory /code/x: " + runcMkdir},
		},
		{
			name:    "mkdir error for another directory is the runtime's",
			e:       ending{exit: 1, runtimeErr: runcMkdir, workDir: "/code/y"},
			want:    Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1, Reason: runcMkdir},
			wantErr: true,
		},
		{
			name:    "runtime failed before start",
			e:       ending{exit: 1, runtimeErr: runcOther},
			want:    Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1, Reason: runcOther},
			wantErr: true,
		},
		{
			name:    "runtime failed before start, silently",
			e:       ending{exit: 2},
			want:    Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1, Reason: "exit status 2"},
			wantErr: true,
		},
		{
			name:    "runtime failed before start, disk full is not the job's",
			e:       ending{exit: 1, runtimeErr: runcOther, diskFull: true, diskBytes: 1 << 20},
			want:    Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1, Reason: runcOther},
			wantErr: true,
		},
		{
			// Stopped while the runtime was still creating the container:
			// nothing started, nothing was signalled, and it is no
			// runtime failure.
			name: "stopped before the job started",
			e:    ending{exit: 1, stop: Stopped},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 1, Reason: "exit status 1"},
		},
		{
			name: "limit reached",
			e:    ending{started: true, exit: 143, stop: Limit, signalled: true},
			want: Result{Outcome: Limit, Attribution: ByJob, ExitCode: 143, Reason: "signal: terminated"},
		},
		{
			name: "limit reached, job handled SIGTERM and exited 0",
			e:    ending{started: true, exit: 0, stop: Limit, signalled: true},
			want: Result{Outcome: Limit, Attribution: ByJob, ExitCode: 0, Reason: "exit status 0"},
		},
		{
			name: "limit reached after the job ended",
			e:    ending{started: true, exit: 0, stop: Limit},
			want: Result{Outcome: Completed, Attribution: ByJob, ExitCode: 0},
		},
		{
			name: "stopped, plain cancel",
			e:    ending{started: true, exit: 137, stop: Stopped, signalled: true, cause: context.Canceled},
			want: Result{Outcome: Stopped, Attribution: ByProvider, ExitCode: 137, Reason: "signal: killed"},
		},
		{
			name: "stopped with a cause",
			e:    ending{started: true, exit: 143, stop: Stopped, signalled: true, cause: withdrawn},
			want: Result{Outcome: Stopped, Attribution: ByProvider, ExitCode: 143, Reason: "withdrawn by its owner; signal: terminated"},
		},
		{
			name: "stopped, OOM and full disk do not count",
			e: ending{started: true, exit: 137, stop: Stopped, signalled: true,
				oom: true, oomKnown: true, diskFull: true, diskBytes: 1 << 20},
			want: Result{Outcome: Stopped, Attribution: ByProvider, ExitCode: 137, Reason: "signal: killed"},
		},
		{
			name: "runtime process killed",
			e:    ending{started: true, exit: -1, processState: "signal: killed"},
			want: Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1, Reason: "runtime died: signal: killed"},
		},
		{
			name: "a write to a read-only path gets a hint",
			e:    ending{started: true, exit: 1, readOnly: true, readOnlyPath: "/ckpt/state.json", writable: "under /out, /tmp and /dev/shm"},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 1, Reason: "exit status 1; " + readOnlyHint("/ckpt/state.json", "under /out, /tmp and /dev/shm")},
		},
		{
			name: "a read-only write does not explain an OOM kill",
			e:    ending{started: true, exit: 137, oom: true, oomKnown: true, readOnly: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 137, Reason: ReasonOOM},
		},
		{
			name: "OOM recorded",
			e:    ending{started: true, exit: 137, oom: true, oomKnown: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 137, Reason: ReasonOOM},
		},
		{
			name: "OOM recorded, any status",
			e:    ending{started: true, exit: 1, oom: true, oomKnown: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 1, Reason: ReasonOOM},
		},
		{
			name: "OOM recorded but the job exited 0",
			e:    ending{started: true, exit: 0, oom: true, oomKnown: true},
			want: Result{Outcome: Completed, Attribution: ByJob, ExitCode: 0},
		},
		{
			name: "OOM unrecorded: SIGKILL at the memory limit",
			e:    ending{started: true, exit: 137, hitMemoryLimit: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 137, Reason: ReasonOOM},
		},
		{
			name: "OOM unrecorded: other status at the memory limit",
			e:    ending{started: true, exit: 1, hitMemoryLimit: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 1, Reason: "exit status 1"},
		},
		{
			name: "no OOM where OOM kills are recorded, at the limit",
			e:    ending{started: true, exit: 137, oomKnown: true, hitMemoryLimit: true},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 137, Reason: "signal: killed"},
		},
		{
			name: "runtime error after the job started",
			e:    ending{started: true, exit: 1, runtimeErr: runcOther},
			want: Result{Outcome: Failed, Attribution: ByProvider, ExitCode: 1, Reason: runcOther},
		},
		{
			name: "disk full",
			e:    ending{started: true, exit: 1, diskFull: true, diskBytes: 64 << 20},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 1, DiskFull: true,
				Reason: "disk quota of 67108864 bytes used up (exit status 1)"},
		},
		{
			name: "disk full and OOM",
			e:    ending{started: true, exit: 137, oom: true, oomKnown: true, diskFull: true, diskBytes: 1024},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 137, DiskFull: true,
				Reason: "disk quota of 1024 bytes used up (oom)"},
		},
		{
			name: "disk full, job completed",
			e:    ending{started: true, exit: 0, diskFull: true, diskBytes: 1024},
			want: Result{Outcome: Completed, Attribution: ByJob, ExitCode: 0},
		},
		{
			name: "disk full, runtime's failure",
			e:    ending{started: true, exit: 1, runtimeErr: runcOther, diskFull: true, diskBytes: 1024},
			want: Result{Outcome: Failed, Attribution: ByProvider, ExitCode: 1, Reason: runcOther},
		},
		{
			name: "disk full at the limit",
			e:    ending{started: true, exit: 143, stop: Limit, signalled: true, diskFull: true, diskBytes: 1024},
			want: Result{Outcome: Limit, Attribution: ByJob, ExitCode: 143, Reason: "signal: terminated"},
		},
		{
			name: "disk full, command not runnable",
			e:    ending{exit: 1, runtimeErr: runcExec, diskFull: true, diskBytes: 1024},
			want: Result{Outcome: Failed, Attribution: ByJob, ExitCode: 127, DiskFull: true,
				Reason: "disk quota of 1024 bytes used up (" + runcExec + ")"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := classify(tc.e)
			if got != tc.want {
				t.Errorf("classify(%+v)\n got %+v\nwant %+v", tc.e, got, tc.want)
			}
			if tc.wantErr {
				if !errors.Is(err, ErrRuntime) {
					t.Errorf("err = %v, want ErrRuntime", err)
				}
			} else if err != nil {
				t.Errorf("err = %v, want nil", err)
			}
		})
	}
}

// The last lines of a job's stderr that name a write to a read-only path,
// as the programs jobs run word it.
func TestReadOnlyWrite(t *testing.T) {
	for _, tc := range []struct {
		name, stderr, path string
		seen               bool
	}{
		{"python", "Traceback (most recent call last):\n  File \"/code/train.py\", line 9\nOSError: [Errno 30] Read-only file system: '/ckpt/state.json'\n", "/ckpt/state.json", true},
		{"dash", "sh: 1: cannot create /ckpt/x: Read-only file system\n", "/ckpt/x", true},
		{"coreutils", "mkdir: cannot create directory ‘/results’: Read-only file system\n", "/results", true},
		{"go", "open /data/out.bin: read-only file system\n", "/data/out.bin", true},
		{"no path", "write failed: Read-only file system\n", "", true},
		{"other failure", "ValueError: bad shape\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "stderr.log")
			if err := os.WriteFile(p, []byte(strings.Repeat("noise\n", 5000)+tc.stderr), 0o644); err != nil {
				t.Fatal(err)
			}
			seen, path := readOnlyWrite(p)
			if seen != tc.seen || path != tc.path {
				t.Fatalf("readOnlyWrite: %v %q, want %v %q", seen, path, tc.seen, tc.path)
			}
		})
	}
	if seen, _ := readOnlyWrite(filepath.Join(t.TempDir(), "absent")); seen {
		t.Fatal("a missing log says read-only")
	}
}
