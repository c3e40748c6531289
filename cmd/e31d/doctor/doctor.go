package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/nvidia"
	"github.com/e31network/e31/node/api"
)

// The report's types are the API's, so that e31 doctor reads what a
// daemon's checks found (GET /v1/doctor) as e31d doctor prints it.
type (
	Status = api.DoctorStatus
	Result = api.DoctorCheck
	Report = api.DoctorReport
)

// The verdicts.
const (
	OK   = api.DoctorOK
	Warn = api.DoctorWarn
	Fail = api.DoctorFail
)

// ErrFailed is returned by the e31d doctor command when any check failed,
// so that it exits non-zero.
var ErrFailed = errors.New("checks failed")

// Options say which configuration to check, as e31d would be started.
type Options struct {
	// DataDir is e31d's --data.
	DataDir string
	// ImageCacheBytes is --image-cache-size: the disk the layer cache may
	// take under DataDir.
	ImageCacheBytes int64
	// DiskReserve is --disk-reserve: the free space no job may take; 0:
	// the daemon's default for the data dir's filesystem.
	DiskReserve uint64
	// UnboundedDisk is --unbounded-disk: jobs are taken where their disks
	// cannot be bounded.
	UnboundedDisk bool
	// Listen are the --listen multiaddrs; none means e31d's default of
	// free ports.
	Listen []string
	// Runtime is --runtime; empty means runc, else crun.
	Runtime string
	// CDISpecDirs default to exec.DefaultCDISpecDirs.
	CDISpecDirs []string
}

// Host is what the checks learn of the machine. Machine probes the real
// one; tests give fakes.
type Host interface {
	// Root reports whether the checks run as root, as e31d must.
	Root() bool
	// Runtime finds an OCI runtime that runs a probe container.
	Runtime(ctx context.Context, configured string) (RuntimeInfo, error)
	Cgroups() (exec.Cgroups, error)
	// UserNamespaces returns /proc/sys/user/max_user_namespaces and the
	// error, if any, of making one with the sandbox's id range.
	UserNamespaces(ctx context.Context) (max int, err error)
	// Overlay mounts and unmounts a read-only overlay of two layers.
	Overlay(ctx context.Context) error
	// JobDisk makes and removes a small per-job disk (exec.MountDisk).
	JobDisk(ctx context.Context) error
	GPUs(ctx context.Context) (nvidia.Driver, error)
	CDISpecs(dirs []string) (CDISpecs, error)
	// Disk measures the filesystem that holds path (or would, once made).
	Disk(path string) (Disk, error)
	// DataDirMode is the permission bits of the data dir at path; an
	// error wrapping fs.ErrNotExist where it is not made yet.
	DataDirMode(path string) (fs.FileMode, error)
	// Bind tries to listen on a multiaddr and closes it again.
	Bind(addr string) error
	// RunningDaemon returns the listen addresses of an e31d running on
	// dataDir, or nil when none runs there.
	RunningDaemon(dataDir string) []string
	// ClockSynced reports whether the kernel's clock is kept in sync
	// (by NTP); known is false where it cannot tell.
	ClockSynced() (synced, known bool)
	// KernelAEAD reports the kernel's release and how it offers
	// algif_aead, for CVE-2026-31431 (copyfail.go).
	KernelAEAD() KernelAEAD
	// WSL says whether the kernel is Windows' WSL and what it offers a
	// GPU job (wsl.go).
	WSL() WSL
}

// RuntimeInfo is the OCI runtime that passed its probe.
type RuntimeInfo struct {
	Path    string
	Version string
	// Images is nil when jobs in their own image can run, else why not.
	Images error
	// JobUIDs is nil when the uids of jobs without an image are the
	// daemon's alone, else who else /etc/subuid gives them to.
	JobUIDs error
	// GPUInjection is how leased GPUs would enter a sandbox.
	GPUInjection string
}

// CDISpecs are the CDI spec files found.
type CDISpecs struct {
	Files   []string
	Devices []string // fully qualified names, e.g. nvidia.com/gpu=0
	Errors  []string // specs that do not parse or conflict
}

// Disk is the space on a filesystem.
type Disk struct {
	Mount      string // the existing directory measured
	Free, Size uint64
	// NotWritable is nil when this user can write in Mount, else why
	// not (a read-only filesystem counts no free space either).
	NotWritable error
}

// checkTimeout bounds each check: a hung runtime or mount must not hang
// the doctor.
const checkTimeout = time.Minute

// Run runs every check against h.
func Run(ctx context.Context, h Host, o Options) Report {
	if o.CDISpecDirs == nil {
		o.CDISpecDirs = exec.DefaultCDISpecDirs
	}
	var gpus int
	checks := []func(context.Context) Result{
		func(context.Context) Result { return checkRoot(h) },
		// On Windows' WSL, what it lacks for GPU jobs; elsewhere no
		// check (a Result without a name is left out).
		func(context.Context) Result { return checkWSL(h, o) },
		func(ctx context.Context) Result { return checkRuntime(ctx, h, o) },
		func(context.Context) Result { return checkCgroups(h) },
		func(ctx context.Context) Result { return checkUserNS(ctx, h) },
		func(ctx context.Context) Result { return checkOverlay(ctx, h) },
		func(ctx context.Context) Result { return checkJobDisk(ctx, h, o) },
		func(ctx context.Context) Result {
			r, n := checkGPUs(ctx, h)
			gpus = n
			return r
		},
		func(context.Context) Result { return checkCDI(h, o, gpus) },
		func(context.Context) Result { return checkDisk(h, o) },
		func(context.Context) Result { return checkDataDirMode(h, o) },
		func(context.Context) Result { return checkListen(h, o) },
		func(context.Context) Result { return checkClock(h) },
		func(context.Context) Result { return checkCopyFail(h) },
	}
	var rep Report
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		r := c(cctx)
		cancel()
		if r.Name == "" {
			continue
		}
		rep.Checks = append(rep.Checks, r)
	}
	return rep
}

func result(name string, s Status, fix string, format string, args ...any) Result {
	return Result{Name: name, Status: s, Detail: fmt.Sprintf(format, args...), Fix: fix}
}
