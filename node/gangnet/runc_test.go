package gangnet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// A real runc sandbox joins a part's namespace by its path, as the job's
// OCI spec will name it, sees e31g0 with its address and nothing else, and
// talks to the other member through the daemons; it cannot change its
// network, with all capabilities inside a user namespace (how image jobs
// run) or with none outside one.
func TestRuncJoinsGangNetwork(t *testing.T) {
	requireRoot(t)
	runc, err := exec.LookPath("runc")
	if err != nil {
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("%s is set but runc is missing", requireEnv)
		}
		t.Skip("runc is missing")
	}
	busybox := ""
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			busybox = p
			break
		}
	}
	if busybox == "" {
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("%s is set but busybox is missing", requireEnv)
		}
		t.Skip("busybox is missing (busybox-static)")
	}
	g := newGang(t, 2)
	a, b := g.nets[0], g.nets[1]

	// Rank 0's part: a server in its namespace that answers one line.
	var l net.Listener
	if err := inNamespace(a.NetNSPath(), func() (err error) {
		l, err = net.Listen("tcp4", a.Addr(0).String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "rank 0 got %q from %s\n", strings.TrimSpace(line), c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()

	script := strings.Join([]string{
		"busybox ip addr",
		"busybox ip route",
		"echo SYS $(busybox ls /sys/class/net)",
		"echo from-the-sandbox | busybox nc " + l.Addr().String(),
		"busybox ip addr add 10.31.0.77/24 dev e31g0 && echo CHANGED-ADDR",
		"busybox ip link set e31g0 down && echo CHANGED-LINK",
		"true",
	}, "; ")
	for _, userns := range []bool{true, false} {
		name := map[bool]string{true: "userns", false: "no-userns"}[userns]
		t.Run(name, func(t *testing.T) {
			dir := bundle(t, busybox, b, userns, script)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id := "e31-gangnet-test-" + randomID(t)
			out, err := exec.CommandContext(ctx, runc, "--root", filepath.Join(dir, "state"), "run", "--bundle", dir, id).CombinedOutput()
			t.Logf("runc run:\n%s", out)
			if err != nil {
				t.Fatalf("runc run: %v", err)
			}
			s := string(out)
			for _, want := range []string{"e31g0", "mtu 65535", "inet 10.31.0.2/24", "SYS e31g0 lo\n", `rank 0 got "from-the-sandbox" from 10.31.0.2`} {
				if !strings.Contains(s, want) {
					t.Errorf("no %q in the sandbox's output", want)
				}
			}
			for _, not := range []string{"eth0", "default", "inet6", "CHANGED-"} {
				if strings.Contains(s, not) {
					t.Errorf("%q in the sandbox's output", not)
				}
			}
		})
	}
}

// bundle writes an OCI bundle that runs script under busybox in a
// sandbox like the job's (exec's sandboxConfig, its mounts too): its own pid, mount, ipc
// and uts namespaces, the gang's network namespace by path, and, with
// userns, a user namespace with every capability in it, which binds the
// part's sysfs at /sys rather than mounting one (see Net.SysfsPath).
func bundle(t *testing.T, busybox string, n *Net, userns bool, script string) string {
	dir, err := os.MkdirTemp("", "gangnet-bundle-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The sandbox's root in a user namespace is an unprivileged host uid:
	// it must be able to walk to its rootfs.
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{dir, rootfs, rootfs + "/bin", rootfs + "/proc", rootfs + "/dev", rootfs + "/sys", rootfs + "/tmp"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rootfs+"/bin/busybox", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	none := []string{}
	caps := &specs.LinuxCapabilities{Bounding: none, Effective: none, Inheritable: none, Permitted: none, Ambient: none}
	user := specs.User{UID: 65534, GID: 65534}
	nss := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace, Path: n.NetNSPath()},
	}
	var uids, gids []specs.LinuxIDMapping
	if userns {
		all := []string{"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_SETGID"}
		caps = &specs.LinuxCapabilities{Bounding: all, Effective: all, Permitted: all, Inheritable: none, Ambient: none}
		user = specs.User{UID: 0, GID: 0}
		nss = append(nss, specs.LinuxNamespace{Type: specs.UserNamespace})
		uids = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		gids = uids
	}
	spec := specs.Spec{
		Version:  "1.0.2",
		Hostname: "part",
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			User:         user,
			Args:         []string{"/bin/busybox", "sh", "-c", script},
			Env:          []string{"PATH=/bin"},
			Cwd:          "/",
			Capabilities: caps,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
		},
		Linux: &specs.Linux{Namespaces: nss, UIDMappings: uids, GIDMappings: gids},
	}
	if userns {
		spec.Mounts[2] = specs.Mount{Destination: "/sys", Type: "bind", Source: n.SysfsPath(), Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}}
	} else {
		spec.Process.NoNewPrivileges = true
	}
	js, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
