package exec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The identity of a run whose runner gives it none of its own (a run
// without an image gets a uid of its own, jobuid.go): nobody.
const (
	jobUID = 65534
	jobGID = 65534
)

// leaseAnnotation carries the lease ID in the bundle's config, so that
// Sweep can recover it from a container name that is only a digest of it.
const leaseAnnotation = "network.e31.lease"

// scratchDefault sizes /tmp and /dev/shm when a job has no memory limit.
// With a limit they take the limit: tmpfs pages are charged to the job's
// memory cgroup, so the limit holds either way, and a small /dev/shm is a
// well-known way to break data loaders.
const scratchDefault = 1 << 30

// hostSystemDirs are the host directories the sandbox's root is built
// from.
var hostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostEtcBinds are the host files and directories of /etc bound read-only
// into the sandbox; see doc.go for why each, and for what is generated
// instead of bound.
var hostEtcBinds = []string{"/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs", "/etc/localtime"}

// symlink is a symlink to recreate in the root: path and target.
type symlink struct{ path, target string }

// hostLayout is what the sandbox takes from the host, read once by
// NewRunner.
type hostLayout struct {
	binds   []string  // directories and files bound read-only at the same path
	links   []symlink // symlinks recreated in the root
	cgroups cgroupLayout
	// nofile is the job's RLIMIT_NOFILE: 65536, or less where the
	// runtime, which inherits ours, could not raise it that far.
	nofile uint64
	// gpuProc is where the driver lists its GPUs (gpuProcDir; elsewhere
	// in tests), whose entries other than a job's own are masked.
	gpuProc string
}

func detectHost() (hostLayout, error) {
	var h hostLayout
	for _, p := range slices.Concat(hostSystemDirs, hostEtcBinds) {
		st, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return h, fmt.Errorf("host layout: %w", err)
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return h, fmt.Errorf("host layout: %w", err)
			}
			h.links = append(h.links, symlink{p, target})
		default:
			h.binds = append(h.binds, p)
		}
	}
	if !slices.Contains(h.binds, "/usr") {
		return h, errors.New("host layout: /usr is not a directory")
	}
	cg, err := detectCgroups()
	if err != nil {
		return h, err
	}
	h.cgroups = cg
	h.gpuProc = gpuProcDir
	h.nofile = 65536
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Max < h.nofile {
		h.nofile = rl.Max
	}
	return h, nil
}

// generatedEtc are the /etc files written into the root rather than bound
// from the host, besides passwd and group (jobEtc).
var generatedEtc = map[string]string{
	"hosts":         "127.0.0.1\tlocalhost e31\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n",
}

// bundleDir is the bundle of the lease whose directory is dir.
func bundleDir(dir string) string { return filepath.Join(dir, "bundle") }

// writeBundle creates the bundle: the root skeleton (empty mount points,
// the recreated symlinks, the generated /etc) and config.json.
func writeBundle(bundle string, cfg *specs.Spec, h hostLayout) error {
	rootfs := filepath.Join(bundle, cfg.Root.Path)
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	// The root must be traversable by the job's uid whatever the umask.
	if err := os.Chmod(rootfs, 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	// Not tmp: runc gives a tmpfs the mode of the directory it covers,
	// and /tmp must be 1777.
	for _, d := range []string{"etc", "proc", "dev", "sys"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	for _, l := range h.links {
		p := filepath.Join(rootfs, l.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if err := os.Symlink(l.target, p); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	etc := maps.Clone(generatedEtc)
	etc["passwd"], etc["group"] = jobEtc(cfg.Process.User.UID, cfg.Process.User.GID)
	for _, name := range slices.Sorted(maps.Keys(etc)) {
		if err := os.WriteFile(filepath.Join(rootfs, "etc", name), []byte(etc[name]), 0o644); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	return writeConfig(bundle, cfg)
}

// writeConfig writes the bundle's config.json.
func writeConfig(bundle string, cfg *specs.Spec) error {
	b, err := json.MarshalIndent(cfg, "", "\t")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// sandboxConfig is the OCI config of a run. s has its defaults applied;
// devices are the leased GPUs' device nodes.
func sandboxConfig(s Spec, cid string, h hostLayout, devices []specs.LinuxDevice) *specs.Spec {
	scratch := uint64(scratchDefault)
	if s.MemoryBytes > 0 {
		scratch = s.MemoryBytes
	}
	scratchSize := "size=" + strconv.FormatUint(scratch/1024, 10) + "k"

	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", scratchSize}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		sysMount(s),
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		// exec allowed: JIT compilers (Triton, CUDA's) load what they
		// build from the temporary directory.
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", scratchSize}},
	}
	if s.Disk != nil {
		// On the job's disk, so that its quota bounds /tmp as well.
		mounts[len(mounts)-1] = specs.Mount{Destination: "/tmp", Type: "bind", Source: diskTmp(*s.Disk), Options: []string{"bind", "rw", "nosuid", "nodev"}}
	}
	// Plain "bind", not "rbind": see doc.go.
	ro := []string{"bind", "ro", "nosuid", "nodev"}
	rw := []string{"bind", "rw", "nosuid", "nodev"}
	for _, p := range h.binds {
		mounts = append(mounts, specs.Mount{Destination: p, Type: "bind", Source: p, Options: ro})
	}
	job := slices.Clone(s.Inputs)
	for i := range job {
		job[i].Source = filepath.Clean(job[i].Source)
	}
	rwTargets := map[string]bool{s.Output.Target: true}
	job = append(job, s.Output)
	if s.Checkpoint != nil {
		job = append(job, *s.Checkpoint)
		rwTargets[s.Checkpoint.Target] = true
	}
	// Parents before children, so that a mount inside another is not
	// hidden by it.
	slices.SortStableFunc(job, func(a, b Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	for _, m := range job {
		opts := ro
		if rwTargets[m.Target] {
			opts = rw
		}
		mounts = append(mounts, specs.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: opts})
	}

	namespaces := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace, Path: s.NetNS},
	}
	if h.cgroups.unified {
		namespaces = append(namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}

	res := &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Pids:    &specs.LinuxPids{Limit: &s.Pids},
	}
	for _, d := range devices {
		res.Devices = append(res.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &d.Major, Minor: &d.Minor, Access: "rwm"})
	}
	if s.MemoryBytes > 0 {
		limit := int64(s.MemoryBytes)
		res.Memory = &specs.LinuxMemory{Limit: &limit}
		if h.cgroups.swap {
			res.Memory.Swap = &limit
		}
	}
	if s.CPUs > 0 {
		period := uint64(100_000)
		quota := int64(s.CPUs) * int64(period)
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}

	cwd := s.Output.Target
	switch {
	case s.WorkDir != "":
		cwd = s.WorkDir
	case s.Image != nil:
		cwd, _ = imageWorkDir(s.Image.Config) // checked by withDefaults
	}
	oomScore := 1000 // on host memory pressure, the guest goes first
	return &specs.Spec{
		// runc 1.1 implements 1.0.2; nothing newer is used.
		Version:  "1.0.2",
		Hostname: "e31",
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			User: specs.User{UID: jobUID, GID: jobGID},
			Args: s.Command,
			Env:  jobEnv(s),
			Cwd:  cwd,
			// Present but empty: an absent capabilities object would
			// leave the runtime's defaults.
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Soft: h.nofile, Hard: h.nofile},
				{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
			},
			OOMScoreAdj: &oomScore,
		},
		Mounts:      mounts,
		Annotations: map[string]string{leaseAnnotation: s.ID},
		Linux: &specs.Linux{
			Namespaces:    namespaces,
			Devices:       devices,
			Resources:     res,
			CgroupsPath:   h.cgroups.path(cid),
			Seccomp:       seccompProfile(),
			MaskedPaths:   slices.Clone(hostMasks),
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// pythonUnbuffered is set to 1 unless the image or the job sets it. A job's
// stdout is a file, not a terminal, so Python would otherwise hold what a
// script prints in a buffer: nothing to see with e31 logs -f while it runs,
// and all of it lost when the job is killed at its limit, withdrawn or
// stopped by a provider that goes away.
const pythonUnbuffered = "PYTHONUNBUFFERED"

// jobEnv is the job's environment: defaults, then the spec's variables,
// then the variables the runner owns, which a spec cannot override. Sorted,
// so that equal specs give equal configs.
func jobEnv(s Spec) []string {
	env := map[string]string{"PATH": defaultPath, "HOME": "/tmp"}
	if s.Image != nil {
		// HOME is set once the image's user is known (setImageUser).
		env = imageEnv(s.Image.Config, nil)
	}
	if _, ok := env[pythonUnbuffered]; !ok {
		env[pythonUnbuffered] = "1"
	}
	maps.Copy(env, s.Env)
	secretEnv(env, s.Secrets)
	delete(env, "CUDA_VISIBLE_DEVICES")
	delete(env, "NVIDIA_VISIBLE_DEVICES")
	delete(env, "E31_CHECKPOINT")
	env["E31_OUTPUT"] = s.Output.Target
	if s.Checkpoint != nil {
		env["E31_CHECKPOINT"] = s.Checkpoint.Target
	}
	if len(s.GPUs) > 0 {
		env["CUDA_VISIBLE_DEVICES"] = visibleDevices(s.GPUs)
		env["NVIDIA_VISIBLE_DEVICES"] = visibleDevices(s.GPUs)
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// gpuDevices returns the device nodes the leased GPUs need: each GPU's
// own node and the driver's control and unified-memory nodes. Simulated
// GPUs need none. A missing GPU or control node is an error: the lease
// promised a GPU the machine cannot give.
func gpuDevices(gpus []GPU) ([]specs.LinuxDevice, error) {
	return gpuDevicesIn("/dev", gpus)
}

// gpuDevicesIn is gpuDevices with the host's nodes looked up in devDir
// instead of /dev, for tests.
func gpuDevicesIn(devDir string, gpus []GPU) ([]specs.LinuxDevice, error) {
	var names []string
	for _, g := range gpus {
		if !g.Simulated {
			names = append(names, "nvidia"+strconv.Itoa(g.Minor))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	names = append(names, "nvidiactl")
	var devs []specs.LinuxDevice
	for _, n := range names {
		d, err := deviceNode(filepath.Join(devDir, n), "/dev/"+n)
		if err != nil {
			return nil, fmt.Errorf("GPU device: %w", err)
		}
		devs = append(devs, d)
	}
	for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
		if d, err := deviceNode(filepath.Join(devDir, n), "/dev/"+n); err == nil {
			devs = append(devs, d)
		}
	}
	return devs, nil
}

// deviceNode describes the host's character device at host for the
// runtime to recreate at path. Mode 0666 because the job is not root.
func deviceNode(host, path string) (specs.LinuxDevice, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(host, &st); err != nil {
		return specs.LinuxDevice{}, fmt.Errorf("%s: %w", host, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return specs.LinuxDevice{}, fmt.Errorf("%s is not a character device", host)
	}
	mode := fs.FileMode(0o666)
	var root uint32
	return specs.LinuxDevice{
		Path: path, Type: "c",
		Major: int64(devMajor(st.Rdev)), Minor: int64(devMinor(st.Rdev)),
		FileMode: &mode, UID: &root, GID: &root,
	}, nil
}

// devMajor and devMinor split a Linux dev_t (glibc's encoding).
func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff) }
func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^uint64(0xff) }

// leaseOfBundle reads the lease ID from a bundle's config, or "".
func leaseOfBundle(bundle string) string {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return ""
	}
	var cfg struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return ""
	}
	return cfg.Annotations[leaseAnnotation]
}

// sysMount is the job's /sys: a sysfs of its own, or, where it joins a
// network namespace made for it (Spec.NetNS), a read-only bind of the one
// its maker mounted from inside that namespace (Spec.Sysfs): the kernel
// lets a process mount a sysfs only if its user namespace owns its network
// namespace, which an image job's does not.
func sysMount(s Spec) specs.Mount {
	if s.Sysfs != "" {
		return specs.Mount{Destination: "/sys", Type: "bind", Source: s.Sysfs, Options: []string{"bind", "ro", "nosuid", "noexec", "nodev"}}
	}
	return specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}}
}
