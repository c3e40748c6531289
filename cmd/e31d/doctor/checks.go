package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/nvidia"
	"github.com/e31network/e31/node/diskroom"
)

// minFreeBytes is the free space below which the data dir fails: the
// stores, inputs and outputs of even a small job would not fit.
const minFreeBytes = 1 << 30

func checkRoot(h Host) Result {
	if h.Root() {
		return result("root", OK, "", "running as root, as e31d must to run sandboxes")
	}
	return result("root", Warn, "run it as root: sudo e31d doctor",
		"not running as root: e31d runs sandboxes as root, so the runtime, user namespace and overlay checks below may fail for that reason alone")
}

func checkRuntime(ctx context.Context, h Host, o Options) Result {
	rt, err := h.Runtime(ctx, o.Runtime)
	if err != nil {
		fix := "install runc (Debian/Ubuntu: apt-get install -y runc; Fedora/RHEL: dnf install -y runc)"
		switch {
		case !h.Root() && !errors.Is(err, exec.ErrRuntimeNotFound):
			// Run by another user a runtime is rootless, which needs
			// user namespaces the sandbox does not set up: the fix is
			// root, not another install.
			fix = "run e31d as root or through the systemd unit, and this check as root: sudo e31d doctor"
		case !errors.Is(err, exec.ErrNoRuntime) || o.Runtime != "":
			fix = "check that the runtime runs a container as root here, or name another with --runtime"
		}
		return result("runtime", Fail, fix, "no OCI runtime runs a probe container: %v", err)
	}
	images := "jobs in their own image: yes"
	if rt.Images != nil {
		images = "jobs in their own image: no (" + rt.Images.Error() + ")"
	}
	r := result("runtime", OK, "", "%s (%s) runs a probe container; %s; GPUs enter by %s", rt.Version, rt.Path, images, rt.GPUInjection)
	// One line reserves both ranges: image jobs' and, after it, the uids
	// of jobs without an image.
	reserve := fmt.Sprintf("reserve the sandbox's uid ranges: add the line e31:%d:%d to /etc/subuid and /etc/subgid", exec.DefaultUIDBase, exec.DefaultJobUIDBase+65536-exec.DefaultUIDBase)
	if rt.Images != nil {
		r.Status = Warn
		r.Fix = "jobs that bring an image will not be taken; fix what the message names"
		if errors.Is(rt.Images, exec.ErrIDRange) {
			r.Fix = reserve
		}
	}
	if rt.JobUIDs != nil {
		r.Status = Warn
		r.Detail += "; the uids of jobs without an image are another's too (" + rt.JobUIDs.Error() + ")"
		r.Fix = reserve
	}
	return r
}

func checkCgroups(h Host) Result {
	c, err := h.Cgroups()
	if err != nil {
		return result("cgroups", Fail, "mount the cgroup hierarchies (systemd does at boot); on cgroup v1 the memory controller must be mounted", "%v", err)
	}
	layout := "v1"
	switch {
	case c.V2:
		layout = "v2"
	case c.Hybrid:
		layout = "v1 (hybrid, with a cgroup2 hierarchy beside it)"
	}
	want := []string{"cpu", "memory", "pids"}
	if !c.V2 {
		want = append(want, "devices")
	}
	var missing []string
	for _, w := range want {
		if !slices.Contains(c.Controllers, w) {
			missing = append(missing, w)
		}
	}
	r := result("cgroups", OK, "", "%s, controllers %s", layout, strings.Join(c.Controllers, " "))
	switch {
	case len(missing) > 0:
		r.Status = Warn
		r.Detail += "; missing " + strings.Join(missing, " ") + ": jobs' limits on them are not enforced"
		r.Fix = "enable the missing controllers (cgroup v2: add them to /sys/fs/cgroup/cgroup.subtree_control; v1: mount them)"
	case !c.SwapLimit:
		r.Status = Warn
		r.Detail += "; swap is not accounted, so a job's memory limit does not cover swap"
		r.Fix = "boot with swapaccount=1 (cgroup v1) or turn swap off"
	default:
		r.Detail += "; swap limited"
	}
	return r
}

func checkUserNS(ctx context.Context, h Host) Result {
	const fix = "jobs in their own image run in a user namespace: set user.max_user_namespaces to 15000 or more (sysctl -w user.max_user_namespaces=15000, and in /etc/sysctl.d/)"
	max, err := h.UserNamespaces(ctx)
	switch {
	case max == 0:
		return result("userns", Warn, fix, "user namespaces are off (user.max_user_namespaces = 0)")
	case err != nil:
		return result("userns", Warn, "check the kernel allows user namespaces (Debian before 11: sysctl -w kernel.unprivileged_userns_clone=1; AppArmor: kernel.apparmor_restrict_unprivileged_userns) and that no other range in /etc/subuid overlaps",
			"a user namespace with uids %d-%d cannot be made: %v", exec.DefaultUIDBase, exec.DefaultUIDBase+65535, err)
	}
	return result("userns", OK, "", "a user namespace with uids %d-%d can be made (max %d)", exec.DefaultUIDBase, exec.DefaultUIDBase+65535, max)
}

func checkOverlay(ctx context.Context, h Host) Result {
	if err := h.Overlay(ctx); err != nil {
		return result("overlay", Warn, "load the module (modprobe overlay, and add overlay to /etc/modules-load.d/) or use a kernel with overlayfs",
			"a read-only overlay cannot be mounted, so jobs in their own image cannot run: %v", err)
	}
	return result("overlay", OK, "", "a read-only overlay of two layers mounts")
}

func checkJobDisk(ctx context.Context, h Host, o Options) Result {
	if err := h.JobDisk(ctx); err != nil {
		fix := "install e2fsprogs (apt-get install e2fsprogs) and load the loop module (modprobe loop)"
		if o.UnboundedDisk {
			return result("job disks", Warn, fix,
				"a job's disk cannot be made, so what jobs write is not bounded (request.disk), as --unbounded-disk allows: %v", err)
		}
		return result("job disks", Fail, fix+"; or take jobs whose writes are not bounded with --unbounded-disk",
			"a job's disk cannot be made, so e31d takes no job here (it cannot bound what jobs write: request.disk): %v", err)
	}
	return result("job disks", OK, "", "a job's disk of its own (ext4 on a loop device) mounts")
}

func checkGPUs(ctx context.Context, h Host) (Result, int) {
	d, err := h.GPUs(ctx)
	if err != nil {
		fix := "install the NVIDIA driver to offer GPUs (without one, e31d still submits jobs, and --sim-gpus simulates GPUs for a test network)"
		if !errors.Is(err, nvidia.ErrNoDriver) {
			fix = ""
		}
		return result("gpus", Warn, fix, "no GPUs: %v", err), 0
	}
	if len(d.GPUs) == 0 {
		return result("gpus", Warn, "check nvidia-smi: the driver is loaded but reports no GPU", "no GPUs: driver %s reports none", d.Version), 0
	}
	var names []string
	for _, g := range d.GPUs {
		names = append(names, fmt.Sprintf("%d: %s, %d GiB", g.Index, g.Model, g.MemoryBytes>>30))
	}
	return result("gpus", OK, "", "driver %s (CUDA %s), %d GPUs: %s", d.Version, d.CUDA, len(d.GPUs), strings.Join(names, "; ")), len(d.GPUs)
}

func checkCDI(h Host, o Options, gpus int) Result {
	dirs := strings.Join(o.CDISpecDirs, " and ")
	specs, err := h.CDISpecs(o.CDISpecDirs)
	if err != nil {
		return result("cdi", Warn, "", "CDI specs in %s cannot be read: %v", dirs, err)
	}
	if len(specs.Errors) > 0 {
		return result("cdi", Warn, "fix or regenerate the specs: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
			"CDI specs with errors: %s", strings.Join(specs.Errors, "; "))
	}
	if len(specs.Files) == 0 {
		if gpus == 0 {
			return result("cdi", OK, "", "no CDI specs in %s (not needed without GPUs)", dirs)
		}
		return result("cdi", Warn, "generate a spec with the NVIDIA Container Toolkit: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
			"no CDI specs in %s: leased GPUs enter sandboxes by their device nodes and the driver's libraries instead", dirs)
	}
	var nvidiaGPUs int
	for _, d := range specs.Devices {
		if strings.HasPrefix(d, "nvidia.com/gpu=") {
			nvidiaGPUs++
		}
	}
	r := result("cdi", OK, "", "%d specs (%s), %d devices", len(specs.Files), strings.Join(baseNames(specs.Files), " "), len(specs.Devices))
	if gpus > 0 && nvidiaGPUs == 0 {
		r.Status = Warn
		r.Detail += ", none named nvidia.com/gpu"
		r.Fix = "generate a spec for the GPUs: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
	}
	return r
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// CheckDisk is the data dir's check alone, which e31d runs at start: that
// it can be written, and the free space on its filesystem.
func CheckDisk(h Host, o Options) Result { return checkDisk(h, o) }

func checkDisk(h Host, o Options) Result {
	d, err := h.Disk(o.DataDir)
	if err != nil {
		return result("disk", Fail, "create the data dir or name another with --data", "data dir %s: %v", o.DataDir, err)
	}
	free := formatBytes(d.Free)
	reserve := cmp.Or(o.DiskReserve, diskroom.DefaultReserve(d.Size))
	switch {
	case d.NotWritable != nil:
		return result("disk", Fail, "name a data dir on a writable filesystem with --data, or remount that one read-write",
			"data dir %s cannot be written: %v", o.DataDir, d.NotWritable)
	case d.Free < minFreeBytes:
		return result("disk", Fail, "free space there, or name a data dir on a larger filesystem with --data",
			"data dir %s: only %s free on %s", o.DataDir, free, d.Mount)
	case d.Free < reserve:
		return result("disk", Fail, "free space there, lower --disk-reserve, or name a data dir on a larger filesystem with --data",
			"data dir %s: %s free on %s, under the %s e31d keeps in reserve: it takes no job until there is more", o.DataDir, free, d.Mount, formatBytes(reserve))
	case o.ImageCacheBytes > 0 && d.Free < uint64(o.ImageCacheBytes):
		return result("disk", Warn, fmt.Sprintf("lower --image-cache-size below %s, or free space", free),
			"data dir %s: %s free on %s, less than the layer cache may take (--image-cache-size %s)", o.DataDir, free, d.Mount, formatBytes(uint64(o.ImageCacheBytes)))
	}
	return result("disk", OK, "", "data dir %s: %s free of %s on %s, %s kept in reserve (jobs' disks, inputs and outputs get the rest); layer cache up to %s",
		o.DataDir, free, formatBytes(d.Size), d.Mount, formatBytes(reserve), formatBytes(uint64(o.ImageCacheBytes)))
}

// checkDataDirMode warns of a data dir other users may enter: they would
// read every job's inputs, outputs and logs there, and the API's token.
// e31d makes it 0700 at every start, so it is a warning, of what a
// daemon already running since it was opened may have shown.
func checkDataDirMode(h Host, o Options) Result {
	mode, err := h.DataDirMode(o.DataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return result("data dir", OK, "", "%s is not made yet: e31d makes it 0700", o.DataDir)
	case err != nil:
		return result("data dir", Warn, "name a data dir e31d can make or reach with --data", "%s: %v", o.DataDir, err)
	case mode&0o077 != 0:
		return result("data dir", Warn, "chmod 700 "+o.DataDir+" (e31d does so itself at every start)",
			"%s is %04o: other users may read the jobs' inputs, outputs and logs there, and the API's token", o.DataDir, mode)
	}
	return result("data dir", OK, "", "%s is %04o: its owner's alone", o.DataDir, mode)
}

func checkListen(h Host, o Options) Result {
	if len(o.Listen) == 0 {
		return result("listen", OK, "", "no --listen: e31d picks a free TCP and QUIC port on every interface; name a fixed port (e.g. /ip4/0.0.0.0/tcp/4031) for peers to bootstrap from and to open in a firewall")
	}
	running := h.RunningDaemon(o.DataDir)
	var bad, held []string
	for _, a := range o.Listen {
		if err := h.Bind(a); err != nil {
			if slices.ContainsFunc(running, func(r string) bool { return sameListen(a, r) }) {
				held = append(held, a)
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: %v", a, err))
		}
	}
	if len(bad) > 0 {
		return result("listen", Fail, "free the port, or choose another --listen address", "cannot listen on %s", strings.Join(bad, "; "))
	}
	detail := "can listen on " + strings.Join(o.Listen, ", ")
	if len(held) > 0 {
		detail = fmt.Sprintf("%s (held by the e31d running on %s)", detail, o.DataDir)
	}
	return result("listen", OK, "", "%s; whether peers can reach it through a firewall or NAT is not checked here", detail)
}

// sameListen reports whether a configured listen address is one the
// running daemon announces: the same transport and port (the daemon
// announces its interfaces' addresses, not 0.0.0.0).
func sameListen(configured, announced string) bool {
	tail := func(a string) string {
		parts := strings.Split(strings.TrimPrefix(a, "/"), "/")
		if len(parts) < 4 {
			return ""
		}
		return strings.Join(parts[2:4], "/") // e.g. tcp/4031
	}
	t := tail(configured)
	return t != "" && t == tail(announced)
}

func checkClock(h Host) Result {
	synced, known := h.ClockSynced()
	switch {
	case !known:
		return result("clock", Warn, "", "cannot tell whether the clock is synchronised; receipts carry times, so keep it in sync with NTP")
	case !synced:
		return result("clock", Warn, "enable NTP: timedatectl set-ntp true (systemd-timesyncd), or install chrony",
			"the system clock is not synchronised by NTP; receipts carry times, and a skewed clock makes them disputable")
	}
	return result("clock", OK, "", "the system clock is synchronised (skew against peers is not measured)")
}

// formatBytes writes n in binary units, as the flags take them.
func formatBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
