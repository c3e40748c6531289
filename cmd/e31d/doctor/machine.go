package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/nvidia"
	"github.com/e31network/e31/node"
	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// Machine is the Host this program runs on. Its probes leave nothing
// behind: the runtime's state, the probe container's bundle and the
// overlay live in a temporary directory removed afterwards.
type Machine struct{}

var _ Host = Machine{}

func (Machine) Root() bool { return os.Geteuid() == 0 }

// Runtime proves a runtime with exec.NewRunner, which runs a container
// with a job's sandbox, under a state root of its own so that it never
// meets the containers of a daemon running here.
func (Machine) Runtime(ctx context.Context, configured string) (RuntimeInfo, error) {
	dir, err := os.MkdirTemp("", "e31-doctor-")
	if err != nil {
		return RuntimeInfo{}, err
	}
	defer os.RemoveAll(dir)
	// The probe's mount root must be traversable by the job's
	// unprivileged root user.
	if err := os.Chmod(dir, 0o711); err != nil {
		return RuntimeInfo{}, err
	}
	r, err := exec.NewRunner(ctx, exec.RunnerOptions{
		Runtime:   configured,
		StateRoot: filepath.Join(dir, "state"),
		MountRoot: filepath.Join(dir, "mnt"),
	})
	if err != nil {
		return RuntimeInfo{}, err
	}
	defer r.Close()
	info := RuntimeInfo{Path: r.Runtime(), Images: r.ImageSupport(), JobUIDs: r.JobUIDs(), GPUInjection: r.GPUInjection()}
	out, err := osexec.CommandContext(ctx, r.Runtime(), "--version").Output()
	if err != nil {
		return RuntimeInfo{}, fmt.Errorf("%s --version: %w", r.Runtime(), err)
	}
	info.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	return info, nil
}

func (Machine) Cgroups() (exec.Cgroups, error) { return exec.DetectCgroups() }

// UserNamespaces runs true in a new user namespace with the mapping image
// jobs get, which needs the kernel's permission and, for a range other
// than one's own uid, CAP_SETUID.
func (Machine) UserNamespaces(ctx context.Context) (int, error) {
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err != nil {
		return 0, err
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("max_user_namespaces: %w", err)
	}
	if max == 0 {
		return 0, nil
	}
	truePath, err := osexec.LookPath("true")
	if err != nil {
		return max, err
	}
	cmd := osexec.CommandContext(ctx, truePath)
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(exec.DefaultUIDBase), Size: 65536}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m}
	if out, err := cmd.CombinedOutput(); err != nil {
		return max, fmt.Errorf("%w %s", err, strings.TrimSpace(string(out)))
	}
	return max, nil
}

// Overlay mounts an overlay of two empty layers, as an image job's root
// is mounted (read-only, no upper layer), and unmounts it.
func (Machine) JobDisk(ctx context.Context) error {
	if err := exec.DiskSupport(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "e31-doctor-disk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := exec.MountDisk(ctx, dir, 16<<20); err != nil {
		return err
	}
	return exec.RemoveDisk(dir)
}

func (Machine) Overlay(context.Context) error {
	dir, err := os.MkdirTemp("", "e31-doctor-overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lower1, lower2, target := filepath.Join(dir, "l1"), filepath.Join(dir, "l2"), filepath.Join(dir, "root")
	for _, d := range []string{lower1, lower2, target} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, "lowerdir="+lower1+":"+lower2); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount overlay: %w", err)
	}
	return nil
}

func (Machine) GPUs(ctx context.Context) (nvidia.Driver, error) { return nvidia.Inspect(ctx) }

func (Machine) CDISpecs(dirs []string) (CDISpecs, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return CDISpecs{}, err
	}
	var out CDISpecs
	for _, v := range cache.ListVendors() {
		for _, s := range cache.GetVendorSpecs(v) {
			out.Files = append(out.Files, s.GetPath())
		}
	}
	out.Devices = cache.ListDevices()
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", path, e))
		}
	}
	slices.Sort(out.Files)
	slices.Sort(out.Errors)
	return out, nil
}

// Disk measures the nearest existing directory at or above path, since
// e31d creates its data dir on first start.
func (Machine) Disk(path string) (Disk, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return Disk{}, err
	}
	for {
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() {
			return Disk{}, fmt.Errorf("%s is not a directory", p)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return Disk{}, err
		}
		p = filepath.Dir(p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return Disk{}, fmt.Errorf("statfs %s: %w", p, err)
	}
	d := Disk{Mount: p, Free: st.Bavail * uint64(st.Bsize), Size: st.Blocks * uint64(st.Bsize)}
	switch {
	case st.Flags&unix.ST_RDONLY != 0:
		d.NotWritable = fmt.Errorf("%s is on a read-only filesystem", p)
	default:
		if err := unix.Access(p, unix.W_OK); err != nil {
			d.NotWritable = fmt.Errorf("%s: %w", p, err)
		}
	}
	return d, nil
}

// DataDirMode stats the data dir.
func (Machine) DataDirMode(path string) (fs.FileMode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !st.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", path)
	}
	return st.Mode().Perm(), nil
}

// Bind listens on the IP and port of a TCP or UDP multiaddr (QUIC and
// WebTransport listen on UDP) and closes it again.
func (Machine) Bind(addr string) error {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return err
	}
	var ip string
	for _, p := range []int{ma.P_IP4, ma.P_IP6} {
		if v, err := m.ValueForProtocol(p); err == nil {
			ip = v
		}
	}
	if ip == "" {
		return fmt.Errorf("%s names no IP address", addr)
	}
	if port, err := m.ValueForProtocol(ma.P_TCP); err == nil {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		if err != nil {
			return err
		}
		return l.Close()
	}
	if port, err := m.ValueForProtocol(ma.P_UDP); err == nil {
		c, err := net.ListenPacket("udp", net.JoinHostPort(ip, port))
		if err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("%s is neither TCP nor UDP", addr)
}

// RunningDaemon reads the run file an e31d writes into its data dir when
// ready, if its process is still alive.
func (Machine) RunningDaemon(dataDir string) []string {
	b, err := os.ReadFile(filepath.Join(dataDir, node.RunFile))
	if err != nil {
		return nil
	}
	var info node.RunInfo
	if json.Unmarshal(b, &info) != nil || info.PID <= 0 {
		return nil
	}
	if err := unix.Kill(info.PID, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return nil
	}
	return info.Addrs
}

// ClockSynced asks adjtimex, whose state is TIME_ERROR while the kernel's
// clock is not disciplined by NTP (what timedatectl shows as "System
// clock synchronized: no").
func (Machine) ClockSynced() (bool, bool) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return false, false
	}
	return state != unix.TIME_ERROR, true
}
