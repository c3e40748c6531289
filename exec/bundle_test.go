package exec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// testHost is a host layout like this Debian's, without reading the host.
func testHost(unified bool) hostLayout {
	return hostLayout{
		binds:   []string{"/usr", "/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs"},
		links:   []symlink{{"/bin", "usr/bin"}, {"/lib", "usr/lib"}, {"/etc/localtime", "/usr/share/zoneinfo/Etc/UTC"}},
		cgroups: cgroupLayout{unified: unified, swap: true},
		nofile:  65536,
	}
}

func TestSandboxConfig(t *testing.T) {
	s, err := Spec{
		ID:          "L1",
		Dir:         "/leases/L1",
		Command:     []string{"python3", "train.py"},
		Env:         map[string]string{"LR": "0.1", "CUDA_VISIBLE_DEVICES": "0", "E31_OUTPUT": "/elsewhere"},
		Inputs:      []Mount{{Source: "/content/model", Target: "/data/model"}, {Source: "/content/set", Target: "/data"}},
		Output:      Mount{Source: "/leases/L1/out", Target: "/out"},
		Checkpoint:  &Mount{Source: "/leases/L1/ckpt", Target: "/ckpt"},
		CPUs:        4,
		MemoryBytes: 8 << 30,
		GPUs:        []GPU{{UUID: "GPU-a", Minor: 0}, {UUID: "GPU-b", Minor: 1}},
	}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	devs := []specs.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}, {Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255}}
	cfg := sandboxConfig(s, ContainerID(s.ID), testHost(false), devs)

	p := cfg.Process
	if p.User.UID != 65534 || p.User.GID != 65534 || !p.NoNewPrivileges || p.Cwd != "/out" {
		t.Errorf("process: %+v", p)
	}
	c := p.Capabilities
	if c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities %+v, want present and empty", c)
	}
	for _, kv := range []string{"LR=0.1", "E31_OUTPUT=/out", "E31_CHECKPOINT=/ckpt", "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b", "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b", "HOME=/tmp", "PYTHONUNBUFFERED=1"} {
		if !slices.Contains(p.Env, kv) {
			t.Errorf("env lacks %s: %v", kv, p.Env)
		}
	}
	if !cfg.Root.Readonly {
		t.Error("root is writable")
	}

	byDest := map[string]specs.Mount{}
	var order []string
	for _, m := range cfg.Mounts {
		byDest[m.Destination] = m
		order = append(order, m.Destination)
		if m.Type == "bind" {
			if slices.Contains(m.Options, "rbind") {
				t.Errorf("%s: recursive bind", m.Destination)
			}
			if strings.HasPrefix(m.Source, "/etc/") && !slices.Contains(hostEtcBinds, m.Source) {
				t.Errorf("binds %s from the host's /etc", m.Source)
			}
			for _, secret := range []string{"/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private", "/root", "/home", "/tmp", "/var", "/leases/L1/bundle", "/"} {
				if m.Source == secret {
					t.Errorf("binds %s", secret)
				}
			}
		}
	}
	if slices.Index(order, "/data") > slices.Index(order, "/data/model") {
		t.Error("a parent mount comes after its child")
	}
	for dest, want := range map[string]string{"/usr": "ro", "/data": "ro", "/data/model": "ro", "/etc/ld.so.cache": "ro", "/out": "rw", "/ckpt": "rw", "/sys": "ro"} {
		if !slices.Contains(byDest[dest].Options, want) {
			t.Errorf("%s: options %v, want %s", dest, byDest[dest].Options, want)
		}
	}
	for _, dest := range []string{"/proc", "/dev", "/dev/pts", "/dev/shm", "/tmp"} {
		if _, ok := byDest[dest]; !ok {
			t.Errorf("no %s", dest)
		}
	}
	if _, ok := byDest["/bin"]; ok {
		t.Error("/bin is bound although it is a symlink")
	}

	l := cfg.Linux
	var ns []specs.LinuxNamespaceType
	for _, n := range l.Namespaces {
		ns = append(ns, n.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.NetworkNamespace} {
		if !slices.Contains(ns, want) {
			t.Errorf("no %s namespace", want)
		}
	}
	if slices.Contains(ns, specs.UserNamespace) || slices.Contains(ns, specs.CgroupNamespace) {
		t.Errorf("namespaces %v", ns)
	}
	for _, n := range l.Namespaces {
		if n.Path != "" {
			t.Errorf("the %s namespace joins %s, want a new one", n.Type, n.Path)
		}
	}
	// A gang part joins the network namespace its provider made for it.
	gang := s
	gang.NetNS, gang.Sysfs = "/run/netns/e31-L1", "/run/e31-sys/L1"
	gcfg := sandboxConfig(gang, ContainerID(s.ID), testHost(false), devs)
	for _, n := range gcfg.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace && n.Path != gang.NetNS {
			t.Errorf("a gang part's network namespace: %q, want %s", n.Path, gang.NetNS)
		}
	}
	for _, m := range gcfg.Mounts {
		if m.Destination == "/sys" && (m.Type != "bind" || m.Source != gang.Sysfs || !slices.Contains(m.Options, "ro")) {
			t.Errorf("a gang part's /sys: %+v, want a read-only bind of %s", m, gang.Sysfs)
		}
	}
	if l.CgroupsPath != "/e31/"+ContainerID("L1") {
		t.Errorf("cgroupsPath %s", l.CgroupsPath)
	}
	r := l.Resources
	if *r.Memory.Limit != 8<<30 || *r.Memory.Swap != 8<<30 || *r.CPU.Quota != 400000 || *r.CPU.Period != 100000 || *r.Pids.Limit != DefaultPids {
		t.Errorf("resources: mem %d swap %d quota %d pids %d", *r.Memory.Limit, *r.Memory.Swap, *r.CPU.Quota, *r.Pids.Limit)
	}
	if r.Devices[0].Allow || r.Devices[0].Access != "rwm" || r.Devices[0].Major != nil {
		t.Errorf("first device rule %+v, want deny all", r.Devices[0])
	}
	if len(r.Devices) != 3 || !r.Devices[1].Allow || *r.Devices[1].Major != 195 || len(l.Devices) != 2 {
		t.Errorf("device rules %+v", r.Devices)
	}
	if l.Seccomp == nil || l.Seccomp.DefaultAction != specs.ActErrno || !slices.Contains(l.Seccomp.Syscalls[0].Names, "read") || slices.Contains(l.Seccomp.Syscalls[0].Names, "bpf") {
		t.Errorf("seccomp %+v", l.Seccomp)
	}
	if !slices.Contains(l.MaskedPaths, "/proc/kcore") || !slices.Contains(l.ReadonlyPaths, "/proc/sys") {
		t.Error("runc's default masked and read-only paths missing")
	}
	if cfg.Annotations[leaseAnnotation] != "L1" {
		t.Error("no lease annotation")
	}

	unified := sandboxConfig(s, "c", testHost(true), nil)
	if !slices.ContainsFunc(unified.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.CgroupNamespace }) {
		t.Error("no cgroup namespace on cgroup v2")
	}
	noswap := testHost(false)
	noswap.cgroups.swap = false
	if cfg := sandboxConfig(s, "c", noswap, nil); cfg.Linux.Resources.Memory.Swap != nil {
		t.Error("swap limit set where swap is not accounted")
	}
}

func TestWriteBundle(t *testing.T) {
	dir := t.TempDir()
	s, _ := Spec{ID: "L1", Dir: dir, Command: []string{"true"}, Output: Mount{Source: dir + "/out", Target: "/out"}}.withDefaults()
	h := testHost(false)
	if err := writeBundle(bundleDir(dir), sandboxConfig(s, "c", h, nil), h); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(bundleDir(dir), "rootfs")
	if target, err := os.Readlink(filepath.Join(rootfs, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("bin -> %q, %v", target, err)
	}
	passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if !strings.Contains(string(passwd), "nobody:x:65534:65534:") || strings.Count(string(passwd), "\n") != 2 {
		t.Errorf("passwd %q", passwd)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "tmp")); err == nil {
		t.Error("rootfs/tmp exists: runc would give /tmp its mode")
	}
	if got := leaseOfBundle(bundleDir(dir)); got != "L1" {
		t.Errorf("leaseOfBundle = %q", got)
	}
}

func TestParseCgroupMounts(t *testing.T) {
	const mountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /mnt/with\040space rw - ext4 /dev/vdb rw
`
	mounts, err := parseCgroupMounts(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	c := cgroupLayout{mounts: mounts}
	if len(mounts) != 4 || c.v1("memory") != "/sys/fs/cgroup/memory" || c.v1("cpuacct") != "/sys/fs/cgroup/cpu,cpuacct" || c.v2() != "/sys/fs/cgroup/unified" || c.v1("pids") != "" {
		t.Errorf("mounts %+v", mounts)
	}
	if got := unescapeMountinfo(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf("unescape: %q", got)
	}
}

func TestRuntimeError(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	os.WriteFile(name, []byte(`{"level":"warning","msg":"ignoring unknown syscall stime"}
not json
{"level":"error","msg":"runc run failed: boom","time":"x"}
`), 0o644)
	if got := runtimeError(name); got != "runc run failed: boom" {
		t.Errorf("got %q", got)
	}
	if got := runtimeError(name + ".missing"); got != "" {
		t.Errorf("missing log: %q", got)
	}
}

func TestDescribeExit(t *testing.T) {
	for code, want := range map[int]string{0: "exit status 0", 3: "exit status 3", 137: "signal: killed", 143: "signal: terminated", 255: "exit status 255"} {
		if got := describeExit(code); got != want {
			t.Errorf("describeExit(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestCommandNotRunnable(t *testing.T) {
	for msg, want := range map[string]bool{
		`runc run failed: unable to start container process: exec: "/no/such": stat /no/such: no such file or directory`: true,
		`runc run failed: unable to start container process: exec: "/data/x": permission denied`:                         true,
		"executable file `train` not found in $PATH: No such file or directory":                                          true,
		`runc run failed: unable to start container process: error during container init: error mounting "/x" to rootfs`: false,
		"": false,
	} {
		if got := commandNotRunnable(msg); got != want {
			t.Errorf("commandNotRunnable(%q) = %v", msg, got)
		}
	}
}
