package exec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrNoRuntime is returned by NewRunner when no working OCI runtime is
// found. Such a node cannot run jobs.
var ErrNoRuntime = errors.New("no working container runtime (runc or crun)")

// ErrRuntimeNotFound is returned by NewRunner, with ErrNoRuntime, when no
// runtime binary is there at all (rather than one that fails its probe).
var ErrRuntimeNotFound = errors.New("not found")

// ErrNoImages is wrapped by the error of Run for an image job, and by
// ImageSupport, on a host where image jobs cannot run (no usable mount
// root, or a uid range that is not the daemon's own).
var ErrNoImages = errors.New("jobs with their own image cannot run on this host")

// ErrRuntime is wrapped by Run's error when the runtime failed before the
// job started: the provider's failure, not the job's.
var ErrRuntime = errors.New("container runtime failed")

// Outcome is how a run ended.
type Outcome string

const (
	// Completed: the job exited 0.
	Completed Outcome = "completed"
	// Failed: the job exited non-zero, was OOM-killed, or could not be
	// started.
	Failed Outcome = "failed"
	// Limit: the job reached its time limit and was stopped.
	Limit Outcome = "limit"
	// Stopped: Run's context was cancelled and the job was stopped.
	Stopped Outcome = "stopped"
)

// Attribution says whose doing an outcome is.
type Attribution string

const (
	// ByJob: the job's own doing (its exit status, its memory, its disk).
	ByJob Attribution = "job"
	// ByProvider: the provider's doing (its runtime, or its stopping
	// the job).
	ByProvider Attribution = "provider"
)

// ReasonOOM is Result.Reason for a job killed for using all of its
// memory limit.
const ReasonOOM = "oom"

// Result is the end of a run.
type Result struct {
	Outcome Outcome
	// Attribution is ByJob or ByProvider. Stopped is ByProvider because
	// the runner knows only that its caller stopped the job; a caller
	// that stopped it for the job's owner says so itself.
	Attribution Attribution
	// ExitCode is the job's exit status, 128+n for death by signal n, or
	// -1 when it never ran or its status was lost.
	ExitCode int
	// Reason explains a failure: ReasonOOM, "signal: killed", "exit
	// status 3", or the runtime's error.
	Reason string
	// DiskFull says the job failed with its Spec.Disk full: it wrote
	// what its quota allows and then some.
	DiskFull       bool
	Started, Ended time.Time
	// Stdout and Stderr are the host paths of the kept log tails.
	Stdout, Stderr string
}

// RunnerOptions configure NewRunner. Zero fields take the defaults given.
type RunnerOptions struct {
	// Runtime is the OCI runtime binary, a path or a name in PATH. Default:
	// runc, else crun, whichever passes the probe.
	Runtime string
	// StateRoot is the runtime's --root, where it keeps container state;
	// Sweep finds leftover containers there. Best on a tmpfs, since the
	// containers do not survive a reboot either. Default: /run/e31/runc.
	StateRoot string
	// Log receives the runner's own events. Default: discarded.
	Log *slog.Logger
	// UIDBase is the first of the 65536 host uids and gids that image
	// jobs run as: container id n is host id UIDBase+n. The range must be
	// the daemon's alone (see DefaultUIDBase); the layer cache must own
	// unpacked files by the same base. Default: DefaultUIDBase.
	UIDBase uint32
	// BundleRoot is where each run's bundle is written, in a directory
	// named for its container. Best on a tmpfs (RunDir). Default: bundle/
	// in the lease directory.
	BundleRoot string
	// MountRoot is where image jobs' roots are mounted. It and every
	// directory above it must be traversable by others (the job's root
	// is an unprivileged host uid); NewRunner creates it with mode 0711.
	// Default: /run/e31-rootfs/<digest of StateRoot>.
	MountRoot string
	// CDISpecDirs are the directories of CDI specs. Default:
	// DefaultCDISpecDirs.
	CDISpecDirs []string
	// JobUIDBase is the first of the 65536 host uids and gids that runs
	// without an image are given, one each (jobuid.go). Like UIDBase's,
	// the range must be the daemon's alone. Default: DefaultJobUIDBase.
	JobUIDBase uint32
	// UIDClaims is the directory where the runners of a host claim those
	// uids; every runner on the host must use the same one. Default:
	// DefaultUIDClaims.
	UIDClaims string
	// DiskBandwidth and DiskIOPS limit what a job reads and, apart,
	// writes per second on its own disk (Spec.Disk), where the host's
	// cgroups can (hostview.go). Default: DefaultDiskBandwidth and
	// DefaultDiskIOPS.
	DiskBandwidth, DiskIOPS uint64
}

// Runner runs jobs in sandboxes. Every field is set by NewRunner and never
// changed, so a Runner may run many jobs at once.
type Runner struct {
	rt        ociRuntime
	log       *slog.Logger
	host      hostLayout
	uidBase   uint32
	mountRoot string
	// bundleRoot holds the bundles, one per container; "" puts each in
	// its lease directory.
	bundleRoot string
	imageErr   error // why image jobs cannot run here, or nil
	gpu        *gpuInjector
	// uids gives each run without an image its own host uid.
	uids uidPool
	// jobUIDErr says why the uids of runs without an image may be
	// another's too, or is nil.
	jobUIDErr error
	diskIO    diskIOLimit
}

// NewRunner finds an OCI runtime that works on this host and returns a
// Runner that uses it. A runtime is accepted only after it has run a
// probe container with the same sandbox as a job's, since a runtime that
// is installed but cannot run this host's cgroup layout is common.
func NewRunner(ctx context.Context, o RunnerOptions) (*Runner, error) {
	if o.StateRoot == "" {
		o.StateRoot = "/run/e31/runc"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.UIDBase == 0 {
		o.UIDBase = DefaultUIDBase
	}
	if o.CDISpecDirs == nil {
		o.CDISpecDirs = DefaultCDISpecDirs
	}
	if o.JobUIDBase == 0 {
		o.JobUIDBase = DefaultJobUIDBase
	}
	if o.UIDClaims == "" {
		o.UIDClaims = DefaultUIDClaims
	}
	if o.DiskBandwidth == 0 {
		o.DiskBandwidth = DefaultDiskBandwidth
	}
	if o.DiskIOPS == 0 {
		o.DiskIOPS = DefaultDiskIOPS
	}
	root, err := filepath.Abs(o.StateRoot)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("runner: state root: %w", err)
	}
	var bundleRoot string
	if o.BundleRoot != "" {
		if bundleRoot, err = filepath.Abs(o.BundleRoot); err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		if err := os.MkdirAll(bundleRoot, 0o700); err != nil {
			return nil, fmt.Errorf("runner: bundle root: %w", err)
		}
	}
	gpu, err := newGPUInjector(o.CDISpecDirs)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	host, err := detectHost()
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	host.cgroups.parent = cgroupParentFor(root)
	uids := uidPool{dir: o.UIDClaims, base: o.JobUIDBase}
	// Runs without an image still get a uid each: shared with another
	// owner's subordinate ids, it is still no other job's.
	jobUIDErr := checkHostSubIDs(o.JobUIDBase, jobUIDCount)
	if jobUIDErr != nil {
		o.Log.WarnContext(ctx, "the uids of jobs without an image are not the daemon's alone", "err", jobUIDErr)
	}

	candidates := runtimeCandidates(o.Runtime)
	if len(candidates) == 0 {
		what := "runc or crun"
		if o.Runtime != "" {
			what = o.Runtime
		}
		return nil, fmt.Errorf("%w: %s %w; install runc (Debian/Ubuntu: apt-get install -y runc; Fedora/RHEL: dnf install -y runc)", ErrNoRuntime, what, ErrRuntimeNotFound)
	}
	var failures []string
	for _, path := range candidates {
		r := &Runner{rt: ociRuntime{path: path, root: root}, log: o.Log, host: host,
			uidBase: o.UIDBase, gpu: gpu, bundleRoot: bundleRoot,
			uids: uids, jobUIDErr: jobUIDErr, diskIO: diskIOLimit{bandwidth: o.DiskBandwidth, iops: o.DiskIOPS}}
		version, err := r.rt.version(ctx)
		if err == nil {
			err = r.probe(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("runner: %w", ctx.Err())
			}
			o.Log.WarnContext(ctx, "container runtime does not work on this host", "runtime", path, "err", err)
			failures = append(failures, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if o.MountRoot == "" {
			o.MountRoot = filepath.Join("/run/e31-rootfs", strings.TrimPrefix(cgroupParentFor(root), cgroupRoot+"/"))
		}
		// A host that cannot run image jobs still runs jobs on its own root.
		mountRoot, imageErr := prepareMountRoot(o.MountRoot)
		if imageErr == nil {
			imageErr = checkHostSubIDs(o.UIDBase, idRange)
		}
		if imageErr != nil {
			imageErr = fmt.Errorf("%w: %w", ErrNoImages, imageErr)
			o.Log.WarnContext(ctx, "jobs with their own image cannot run here", "err", imageErr)
		}
		r.mountRoot, r.imageErr = mountRoot, imageErr
		o.Log.InfoContext(ctx, "container runtime ready", "runtime", path, "version", version,
			"cgroup_v2", host.cgroups.unified, "swap_limit", host.cgroups.swap,
			"io_weight", host.cgroups.io.weight != 0, "disk_io_limit", host.cgroups.io.throttle,
			"images", imageErr == nil, "gpu_injection", r.GPUInjection())
		return r, nil
	}
	fix := "install a runc that works here (apt-get install -y runc)"
	installed := slices.ContainsFunc(candidates, func(p string) bool { _, err := os.Stat(p); return err == nil })
	if installed && os.Geteuid() != 0 {
		// A runtime run by another user is rootless, which needs user
		// namespaces and cgroup delegation the sandbox does not ask for.
		fix = "the sandbox runs as root: run e31d as root or through the systemd unit"
	}
	if !installed {
		return nil, fmt.Errorf("%w: %s (%w); %s", ErrNoRuntime, strings.Join(failures, "; "), ErrRuntimeNotFound, fix)
	}
	return nil, fmt.Errorf("%w: %s; %s", ErrNoRuntime, strings.Join(failures, "; "), fix)
}

// probe runs `true` in a sandbox with every kind of limit set.
func (r *Runner) probe(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "e31-probe-")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(dir)
	var nonce [6]byte
	rand.Read(nonce[:])
	res, err := r.Run(ctx, Spec{
		ID:          "probe-" + hex.EncodeToString(nonce[:]),
		Dir:         dir,
		Command:     []string{"true"},
		Output:      Mount{Source: filepath.Join(dir, "out"), Target: "/out"},
		CPUs:        1,
		MemoryBytes: 64 << 20,
		Pids:        16,
		Limit:       30 * time.Second,
		Grace:       time.Second,
		LogCap:      64 << 10,
	})
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if res.Outcome != Completed {
		stderr, _ := os.ReadFile(res.Stderr)
		return fmt.Errorf("probe: %s (%s): %s", res.Outcome, res.Reason, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// Run runs the job described by s and blocks until it ends. At s.Limit,
// or when ctx is cancelled, the job gets SIGTERM and, s.Grace later,
// SIGKILL. Run returns an error only for a failure on the provider's side
// before the job started (a bad spec, an unusable directory, the runtime
// failing); the Result is then also filled in, with Attribution
// ByProvider. Whatever happens, the container, the bundle and the job's
// cgroup are gone when Run returns; the log files stay.
func (r *Runner) Run(ctx context.Context, s Spec) (Result, error) {
	res := Result{Outcome: Failed, Attribution: ByProvider, ExitCode: -1}
	fail := func(err error) (Result, error) {
		res.Reason = err.Error()
		if res.Started.IsZero() {
			res.Started = time.Now()
		}
		res.Ended = time.Now()
		return res, err
	}
	s, err := s.withDefaults()
	if err != nil {
		return fail(err)
	}
	cid := ContainerID(s.ID)
	if ctx.Err() != nil {
		// Stopped before it started: nothing ran and there are no logs.
		res.Outcome, res.Reason = Stopped, "stopped before start"
		res.Started = time.Now()
		res.Ended = res.Started
		return res, nil
	}
	res.Stdout = filepath.Join(s.Dir, "stdout.log")
	res.Stderr = filepath.Join(s.Dir, "stderr.log")
	log := r.log.With("lease", s.ID, "container", cid)

	// Cleanup must run even when ctx is what ended the run.
	cleanupCtx := context.WithoutCancel(ctx)
	// A container or bundle left by a crash would make the runtime refuse
	// the name or the bundle directory.
	if err := r.Cleanup(cleanupCtx, s.ID, s.Dir); err != nil {
		return fail(fmt.Errorf("%w: clearing a previous run: %w", ErrRuntime, err))
	}
	defer func() {
		if err := r.Cleanup(cleanupCtx, s.ID, s.Dir); err != nil {
			log.ErrorContext(ctx, "sandbox cleanup failed", "err", err)
		}
	}()

	if err := prepareDirs(s); err != nil {
		var wd workDirError
		if !errors.As(err, &wd) {
			return fail(err)
		}
		// What the job left in its own folders (a restored checkpoint
		// holding a file where the working directory goes) is the job's
		// to fix: it fails as a command that cannot start does, saying
		// why in its stderr.
		res.Started = time.Now()
		res.Ended = res.Started
		res.Outcome, res.Attribution, res.ExitCode, res.Reason = Failed, ByJob, -1, err.Error()
		if werr := errors.Join(os.WriteFile(res.Stdout, nil, 0o644), os.WriteFile(res.Stderr, []byte(err.Error()+"\n"), 0o644)); werr != nil {
			return fail(werr)
		}
		return res, nil
	}
	bundle := r.BundleDir(s.ID, s.Dir)
	if err := r.prepareSandbox(s, cid, bundle); err != nil {
		return fail(err)
	}
	stdout, err := createTailFile(res.Stdout, s.LogCap)
	if err != nil {
		return fail(err)
	}
	defer stdout.Close()
	stderr, err := createTailFile(res.Stderr, s.LogCap)
	if err != nil {
		return fail(err)
	}
	defer stderr.Close()

	runtimeLog := filepath.Join(bundle, "runtime.log")
	pidFile := filepath.Join(bundle, "pid")
	cmd := r.rt.command(context.Background(),
		"--log", runtimeLog, "--log-format", "json",
		"run", "--keep", "--bundle", bundle, "--pid-file", pidFile, cid)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that a terminal's ^C reaches the daemon
	// (which stops jobs through ctx) and not every job at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The runtime passes the pipes on to the job; once the job is dead,
	// nothing should hold them, but never wait forever for EOF.
	cmd.WaitDelay = 10 * time.Second

	res.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrRuntime, err))
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()

	var limit <-chan time.Time
	if s.Limit > 0 {
		limit = time.After(s.Limit)
	}
	stop := Outcome("")
	select {
	case <-done:
	case <-limit:
		stop = Limit
	case <-ctx.Done():
		stop = Stopped
	}
	signalled := false
	if stop != "" {
		grace := s.Grace
		if stop == Stopped && errors.Is(context.Cause(ctx), ErrStopNow) {
			grace = 0
		}
		log.InfoContext(ctx, "stopping job", "why", stop, "grace", grace)
		signalled = r.stop(cleanupCtx, log, cid, grace, done, func() { cmd.Process.Kill() })
	}
	<-done
	res.Ended = time.Now()

	exit := cmd.ProcessState.ExitCode()
	_, startErr := os.Stat(pidFile)
	started := startErr == nil
	rtErr := runtimeError(runtimeLog)
	oom, oomKnown, hitLimit := r.host.cgroups.oomKilled(cid)
	if started && exit >= 0 {
		// The runtime waited for the job's init to exit: the container is
		// stopped, and deleting it needs no runtime process. On any
		// failure the deferred Cleanup has the runtime delete it.
		if err := r.rt.removeStopped(cid, bundle, func() error { return r.host.cgroups.remove(cid) }); err != nil {
			log.DebugContext(ctx, "stopped container left to the runtime's delete", "err", err)
		}
	}
	end := ending{
		started: started, exit: exit, processState: cmd.ProcessState.String(),
		runtimeErr: rtErr, stop: stop, signalled: signalled, cause: context.Cause(ctx),
		oom: oom, oomKnown: oomKnown, hitMemoryLimit: hitLimit, workDir: s.WorkDir,
	}
	if s.Disk != nil {
		end.diskFull, end.diskBytes = s.Disk.full(), s.Disk.Bytes
	}
	if started && exit > 0 && stop == "" {
		end.readOnly, end.readOnlyPath = readOnlyWrite(res.Stderr)
		end.writable = writablePaths(s)
	}
	verdict, err := classify(end)
	res.Outcome, res.Attribution, res.ExitCode, res.Reason, res.DiskFull =
		verdict.Outcome, verdict.Attribution, verdict.ExitCode, verdict.Reason, verdict.DiskFull
	if err != nil {
		return res, err
	}
	log.InfoContext(ctx, "job ended", "outcome", res.Outcome, "attribution", res.Attribution,
		"exit", res.ExitCode, "reason", res.Reason, "took", res.Ended.Sub(res.Started))
	return res, nil
}

// stop sends SIGTERM to every process of the job, waits up to grace for
// it to end, then sends SIGKILL. A signal is retried until it is
// delivered or the job ends, since the container may still be being
// created. It reports whether a signal reached the job (if none did, the
// job ended on its own). If the job outlives SIGKILL, kill ends the
// runtime process and the cleanup after Run removes the rest.
func (r *Runner) stop(ctx context.Context, log *slog.Logger, cid string, grace time.Duration, done <-chan struct{}, kill func()) bool {
	graceEnd := time.After(grace)
	signalled := r.signalUntil(ctx, cid, "TERM", done, graceEnd)
	if !r.waitGrace(log, cid, done, graceEnd) {
		return signalled
	}
	killEnd := time.After(runtimeTimeout)
	if r.signalUntil(ctx, cid, "KILL", done, killEnd) {
		signalled = true
	}
	select {
	case <-done:
	case <-killEnd:
		log.ErrorContext(ctx, "job survived SIGKILL; killing the runtime process")
		kill()
	}
	return signalled
}

// waitGrace waits, after SIGTERM, until the job ends (false) or its grace
// is over (true). The grace is over early once no process of the job can
// act on SIGTERM any more (stop.go).
func (r *Runner) waitGrace(log *slog.Logger, cid string, done <-chan struct{}, graceEnd <-chan time.Time) bool {
	tick := time.NewTicker(graceCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false
		case <-graceEnd:
			return true
		case <-tick.C:
			if pids, err := r.host.cgroups.procs(cid); err == nil && !mayActOnTerm(pids) {
				log.Info("no process of the job handles SIGTERM: killing it without waiting out the grace", "processes", len(pids))
				return true
			}
		}
	}
}

// graceCheckEvery is how often a job being stopped is looked at for a
// process that handles SIGTERM.
const graceCheckEvery = 100 * time.Millisecond

// signalUntil retries sending sig until it is delivered, the job ends or
// deadline fires, and reports whether it was delivered.
func (r *Runner) signalUntil(ctx context.Context, cid, sig string, done <-chan struct{}, deadline <-chan time.Time) bool {
	for {
		if r.rt.signal(ctx, cid, sig) == nil {
			return true
		}
		select {
		case <-done:
			return false
		case <-deadline:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// commandNotRunnable reports whether a runtime error says the job's
// command could not be executed (missing, not executable, wrong format):
// runc says "unable to start container process: exec: ...", crun
// "executable file `x` not found".
func commandNotRunnable(rtErr string) bool {
	return strings.Contains(rtErr, "container process: exec: ") ||
		strings.Contains(rtErr, "executable file") && strings.Contains(rtErr, "not found")
}

// workDirNotMade reports whether a runtime error says the job's working
// directory could not be made or entered: runc creates a missing one
// ("mkdir /code/x: read-only file system"), crun enters it ("chdir to
// `/code/x`").
func workDirNotMade(rtErr, dir string) bool {
	if dir == "" {
		return false
	}
	return strings.Contains(rtErr, "mkdir "+dir) || strings.Contains(rtErr, "chdir to `"+dir) || strings.Contains(rtErr, "chdir "+dir)
}

// describeExit turns a runtime's exit status into a reason in the words
// Go uses for a process.
func describeExit(code int) string {
	if code > 128 && code < 128+65 {
		return "signal: " + syscall.Signal(code-128).String()
	}
	return fmt.Sprintf("exit status %d", code)
}

// prepareDirs creates the lease directory and the job's writable
// directories and checks that the inputs exist. prepareSandbox then hands
// the writable ones to the job's uid, recursively because a checkpoint
// restored from an earlier run must be rewritable.
func prepareDirs(s Spec) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("lease dir: %w", err)
	}
	for _, m := range s.Inputs {
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("input %s: %w", m.Target, err)
		}
	}
	writable := []Mount{s.Output}
	if s.Checkpoint != nil {
		writable = append(writable, *s.Checkpoint)
	}
	for _, m := range writable {
		if err := os.MkdirAll(m.Source, 0o755); err != nil {
			return fmt.Errorf("%s: %w", m.Target, err)
		}
		// A working directory in a writable folder is made here, so that
		// it is the job's with the rest of the folder; the runtime would
		// make it root's. os.Root: a restored checkpoint's links are not
		// followed out of the folder.
		if rel, ok := inside(m.Target, s.WorkDir); ok {
			if err := mkdirIn(m.Source, rel); err != nil {
				return workDirError{dir: s.WorkDir, err: err}
			}
		}
	}
	if s.Disk != nil {
		if err := makeDiskTmp(*s.Disk); err != nil {
			return err
		}
	}
	return nil
}

// workDirError is a working directory that cannot be made in the job's
// writable folder.
type workDirError struct {
	dir string
	err error
}

func (e workDirError) Error() string { return fmt.Sprintf("working directory %s: %v", e.dir, e.err) }
func (e workDirError) Unwrap() error { return e.err }

// inside reports whether the clean absolute path p is dir or below it, and
// p relative to dir.
func inside(dir, p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if p == dir {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/"); ok {
		return rel, true
	}
	return "", false
}

// mkdirIn makes rel and its parents inside the folder root, never
// following a link out of it.
func mkdirIn(root, rel string) error {
	if rel == "." {
		return nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.MkdirAll(rel, 0o755)
}

// Cleanup removes what a run of lease id in dir may have left: the
// container (killed if still running), its image root mount, its bundle
// and its cgroup directories. It is idempotent; Run calls it before and
// after every run.
func (r *Runner) Cleanup(ctx context.Context, id string, dir string) error {
	cid := ContainerID(id)
	var errs []error
	rtErr := r.rt.remove(ctx, cid)
	if rtErr != nil {
		errs = append(errs, rtErr)
	}
	// The bundle holds the overlay's skeleton layer: never delete it
	// while the overlay is mounted.
	if err := unmountImageRoot(r.rootMount(cid)); err != nil {
		errs = append(errs, err)
	} else if err := removeBundle(r.BundleDir(id, dir)); err != nil {
		errs = append(errs, err)
	}
	cgErr := r.host.cgroups.remove(cid)
	if cgErr != nil {
		errs = append(errs, cgErr)
	}
	// Its uid, once no process of it can be left to share it.
	if rtErr == nil && cgErr == nil {
		if err := r.uids.release(r.host.cgroups.path(cid)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// BundleDir is where the run of lease id, whose lease directory is dir,
// has its bundle while it runs.
func (r *Runner) BundleDir(id, dir string) string {
	if r.bundleRoot == "" {
		return bundleDir(dir)
	}
	return filepath.Join(r.bundleRoot, ContainerID(id))
}

// isBundle reports whether path is where this runner puts bundles: a lease
// directory's bundle/, or a directory in the bundle root.
func (r *Runner) isBundle(path string) bool {
	return filepath.Base(path) == "bundle" || r.bundleRoot != "" && filepath.Dir(path) == r.bundleRoot
}

// removeBundle deletes a bundle directory, unless something is mounted
// inside it on the host: the runtime mounts only in the container's own
// mount namespace, so a mount here is a leak, and deleting through it
// could delete what it binds. The one mount the runner makes there, the
// tmpfs of a run with secrets, it unmounts first.
func removeBundle(bundle string) error {
	// The tmpfs of a run with secrets is the runner's own, and goes first,
	// the secrets with it.
	if err := unmountBundleTmpfs(bundle); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	mounted, err := mountedUnder(bundle)
	if err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	if len(mounted) > 0 {
		return fmt.Errorf("remove bundle: %s is still mounted", mounted[0])
	}
	if err := os.RemoveAll(bundle); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	return nil
}

// mountedUnder lists the host's mount points at or below dir.
func mountedUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMountinfo(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, nil
}

// Sweep removes, after a daemon restart, every container of this runner's
// state root whose lease keep says is not live, with its bundle and
// cgroups, and any cgroup a lost container left. Containers of live leases
// are left alone.
func (r *Runner) Sweep(ctx context.Context, keep func(id string) bool) error {
	cs, err := r.rt.list(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	var errs []error
	known := map[string]bool{}
	// inUse: containers whose processes may still run, and keep their uid.
	inUse := map[string]bool{}
	// live: what container cid belongs to is a lease keep says is live.
	live := func(lease, cid string) bool { return lease != "" && ContainerID(lease) == cid && keep(lease) }
	for _, c := range cs {
		if !strings.HasPrefix(c.ID, "e31-") {
			continue
		}
		known[c.ID] = true
		lease := c.Annotations[leaseAnnotation]
		if lease == "" {
			lease = leaseOfBundle(c.Bundle)
		}
		if live(lease, c.ID) {
			inUse[c.ID] = true
			continue
		}
		r.log.InfoContext(ctx, "sweeping container of a dead lease", "container", c.ID, "lease", lease, "status", c.Status)
		if err := r.rt.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			inUse[c.ID] = true
		}
		// Only a directory that is one of our bundles, and only once
		// the image root over its skeleton is gone.
		if err := unmountImageRoot(r.rootMount(c.ID)); err != nil {
			errs = append(errs, err)
		} else if lease != "" && r.isBundle(c.Bundle) {
			if err := removeBundle(c.Bundle); err != nil {
				errs = append(errs, err)
			}
		}
		if err := r.host.cgroups.remove(c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	// Image roots whose container is already gone (a crash between the
	// mount and the runtime's start, or after its delete).
	entries, err := os.ReadDir(r.mountRoot)
	if err != nil && r.imageErr == nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	for _, e := range entries {
		m := r.rootMount(e.Name())
		if !strings.HasPrefix(e.Name(), "e31-") || known[e.Name()] {
			continue
		}
		lease, _ := os.ReadFile(m.leaseFile())
		if live(string(lease), e.Name()) {
			continue
		}
		r.log.InfoContext(ctx, "sweeping image root of a dead lease", "container", e.Name(), "lease", string(lease))
		if err := unmountImageRoot(m); err != nil {
			errs = append(errs, err)
		}
	}
	// Bundles whose container the runtime no longer lists: a daemon killed
	// while the runtime deleted its container, or before it created one.
	if r.bundleRoot != "" {
		entries, err := os.ReadDir(r.bundleRoot)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
		for _, e := range entries {
			bundle := filepath.Join(r.bundleRoot, e.Name())
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "e31-") || known[e.Name()] {
				continue
			}
			lease := leaseOfBundle(bundle)
			if live(lease, e.Name()) {
				continue
			}
			r.log.InfoContext(ctx, "sweeping bundle of a dead lease", "container", e.Name(), "lease", lease)
			if err := unmountImageRoot(r.rootMount(e.Name())); err != nil {
				errs = append(errs, err)
			} else if err := removeBundle(bundle); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// A state directory the runtime left empty (killed while it created
	// or deleted the container) lists as no container: rmdir only.
	if states, err := os.ReadDir(r.rt.root); err == nil {
		for _, e := range states {
			if e.IsDir() && strings.HasPrefix(e.Name(), "e31-") && !known[e.Name()] {
				_ = os.Remove(filepath.Join(r.rt.root, e.Name()))
			}
		}
	}
	// Only this runner's own parent is swept; rmdir refuses a cgroup that
	// still has processes, and that is right.
	for _, id := range r.host.cgroups.leftovers() {
		if !known[id] {
			err := r.host.cgroups.remove(id)
			switch {
			case errors.Is(err, syscall.EBUSY):
				inUse[id] = true
			case err != nil:
				errs = append(errs, err)
			}
		}
	}
	// The uids claimed for this runner's containers that are gone.
	mine := r.host.cgroups.path("")
	if err := r.uids.releaseIf(func(owner string) bool {
		cid, ok := strings.CutPrefix(owner, mine)
		return ok && !inUse[cid]
	}); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweep: %w", errors.Join(errs...))
	}
	return nil
}

// ImageSupport returns nil when this runner can run jobs in their own
// image, else an error wrapping ErrNoImages that says why. The daemon
// should not offer to run image jobs then.
func (r *Runner) ImageSupport() error { return r.imageErr }

// JobUIDs returns nil when the host uids that runs without an image are
// given (one each, RunnerOptions.JobUIDBase) are the daemon's alone, else
// an error wrapping ErrIDRange that says who else /etc/subuid or
// /etc/subgid gives them to. Jobs still run, each as a uid no other job
// has, but that owner's containers may have it too.
func (r *Runner) JobUIDs() error { return r.jobUIDErr }

// GPUInjection says how this runner gives leased GPUs to jobs, for the
// daemon to log at start: "cdi (N specs in DIRS)", "driver device nodes
// and libraries (...)" or "none (...)".
func (r *Runner) GPUInjection() string { return r.gpu.describe() }

// rootMount is where the image root of container cid is mounted.
func (r *Runner) rootMount(cid string) rootMount {
	if r.mountRoot == "" {
		return rootMount{}
	}
	return rootMount{dir: filepath.Join(r.mountRoot, cid)}
}

// prepareMountRoot creates the mount root and checks that the job's
// unprivileged root can walk to it.
func prepareMountRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("mount root: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("mount root: %w", err)
	}
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("mount root: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return "", fmt.Errorf("mount root %s: %s is not traversable by others (chmod o+x it, or choose another MountRoot)", dir, p)
		}
		if p == "/" {
			return dir, nil
		}
	}
}

// Runtime is the path of the OCI runtime binary in use.
func (r *Runner) Runtime() string { return r.rt.path }
