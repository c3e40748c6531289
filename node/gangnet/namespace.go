package gangnet

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Where named network namespaces live, as iproute2's ip netns has them:
// runc, nsenter and ip netns exec all find them there.
const (
	netnsDir = "/run/netns"
	// varNetnsDir is the older name, a link to netnsDir on most systems;
	// Sweep looks there too when it is not.
	varNetnsDir = "/var/run/netns"
	// sysfsDir holds a sysfs of each namespace (Net.SysfsPath). Not under
	// /run/e31, where exec may mount a tmpfs that would hide it.
	sysfsDir = "/run/e31-gangnet"
	// namespacePrefix marks the namespaces this package owns.
	namespacePrefix = "e31-"
)

func namespaceName(lease string) string { return namespacePrefix + lease }

// namespace is where a part's namespace is named and seen.
type namespace struct {
	path string // the named namespace, under netnsDir
	sys  string // a sysfs mounted from inside it, under sysfsDir
}

func namespaceAt(name string) namespace {
	return namespace{path: filepath.Join(netnsDir, name), sys: filepath.Join(sysfsDir, name)}
}

// createNamespace makes the named network namespace with lo up and a TUN
// device Interface holding addr, and a sysfs of it, and returns where they
// are and the device. The device's file is non-blocking, so reads and
// writes go through Go's poller.
func createNamespace(name string, addr netip.Prefix) (namespace, *os.File, error) {
	ns := namespaceAt(name)
	type made struct {
		dev *os.File
		err error
	}
	ch := make(chan made, 1)
	// A goroutine of its own: its thread enters the new namespace, and if
	// it cannot come back the thread must end with this goroutine, not
	// return to the scheduler and run someone else's code in the wrong
	// namespace.
	go func() {
		dev, err := enterAndMake(ns)
		ch <- made{dev, err}
	}()
	m := <-ch
	if m.err != nil {
		return namespace{}, nil, m.err
	}
	if err := configure(ns.path, addr); err != nil {
		m.dev.Close()
		return namespace{}, nil, errors.Join(err, removeNamespace(ns))
	}
	return ns, m.dev, nil
}

// enterAndMake does what must happen inside the new namespace: create it
// and name it, mount its sysfs, turn IPv6 off, and open the TUN device,
// which is made in the namespace of the thread that opens /dev/net/tun. It
// returns with the thread back in the daemon's namespace.
func enterAndMake(ns namespace) (dev *os.File, err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("get the daemon's network namespace: %w", err)
	}
	defer orig.Close()
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	// O_EXCL: never take over a namespace that exists, another lease's
	// or one a crash left for Sweep.
	f, err := os.OpenFile(ns.path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("name the network namespace: %w", err)
	}
	f.Close()
	if err := os.MkdirAll(ns.sys, 0o755); err != nil {
		runtime.UnlockOSThread()
		return nil, errors.Join(err, removeNamespace(ns))
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, errors.Join(fmt.Errorf("make a network namespace: %w", err), removeNamespace(ns))
	}
	// The thread is in the new namespace now: every way out goes back.
	defer func() {
		if serr := netns.Set(orig); serr != nil {
			// The thread stays locked, so the runtime ends it with this
			// goroutine. This part fails rather than go on from a state
			// nobody planned for.
			if dev != nil {
				dev.Close()
				dev = nil
			}
			err = errors.Join(err, fmt.Errorf("return to the daemon's network namespace: %w", serr), removeNamespace(ns))
			return
		}
		runtime.UnlockOSThread()
	}()
	defer func() {
		if err != nil {
			err = errors.Join(err, removeNamespace(ns))
		}
	}()
	// A bind mount keeps the namespace alive with no process in it, at a
	// path that runc's spec can name. thread-self, not self: self is the
	// process's main thread, which is in the daemon's namespace.
	if err := unix.Mount("/proc/thread-self/ns/net", ns.path, "none", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind the network namespace to %s: %w", ns.path, err)
	}
	// A sysfs shows the network namespace of whoever mounts it. A sandbox
	// in a user namespace may not mount one of a network namespace its
	// user namespace does not own (this one: the daemon's owns it), so it
	// binds this one instead (see Net.SysfsPath).
	if err := unix.Mount("sysfs", ns.sys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount a sysfs of the network namespace at %s: %w", ns.sys, err)
	}
	// The daemon forwards no IPv6 anyway; with it off the kernel inside
	// sends none (router solicitations, MLD) to be dropped. A kernel
	// without IPv6 has no such files, which is as good.
	for _, conf := range []string{"all", "default"} {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0)
	}
	return openTun(Interface)
}

// openTun opens /dev/net/tun as a TUN device (IP packets, no Ethernet) with
// no packet information header: each read and write is one bare IP
// packet.
func openTun(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make TUN device %s: %w", name, err)
	}
	// Not TUNSETPERSIST: the device goes with the daemon's file, so a
	// daemon that dies leaves no device that forwards.
	return os.NewFile(uintptr(fd), "/dev/net/tun"), nil
}

// configure sets the namespace's links up from the daemon's namespace,
// through a netlink handle made in the part's: lo, and Interface with its
// address, which also gives the subnet's route. No default route: the
// subnet is all the part can reach.
func configure(path string, addr netip.Prefix) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	l, err := h.LinkByName(Interface)
	if err != nil {
		return err
	}
	if err := h.LinkSetMTU(l, MTU); err != nil {
		return fmt.Errorf("set %s's MTU to %d: %w", Interface, MTU, err)
	}
	ipn := &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("add %s to %s: %w", addr, Interface, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", Interface, err)
	}
	return nil
}

// removeNamespace unmounts and removes a namespace's name and its sysfs.
// The namespace itself lives on while a process is in it or a file holds
// it; only its names go. What is already gone is not an error.
func removeNamespace(ns namespace) error {
	return errors.Join(unmountAndRemove(ns.sys), unmountAndRemove(ns.path))
}

// unmountAndRemove unmounts whatever is mounted at path (a crash and a
// second Open may have stacked two) and removes it.
func unmountAndRemove(path string) error {
	for range 8 {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// RemoveLeftover removes the namespace of the part under lease, and its
// sysfs mount, that a daemon left behind when it died with the part's Net
// open: its restart calls it for each lease it had. A sandbox still
// running in it keeps its namespace, unnamed, until it ends; its TUN
// device went with the dead daemon's files. What is gone is no error.
func RemoveLeftover(lease string) error {
	return removeNamespace(namespaceAt(namespaceName(lease)))
}

// Sweep removes every namespace named e31-* (and its sysfs mount), for a
// machine with one daemon, at its start, before any Open. Where several
// daemons share a host (a test network), each removes its own with
// RemoveLeftover instead.
func Sweep(log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return sweep(log, namespacePrefix)
}

// sweep removes the named namespaces whose names start with prefix.
func sweep(log *slog.Logger, prefix string) error {
	dirs := []string{netnsDir}
	if a, err := filepath.EvalSymlinks(varNetnsDir); err == nil {
		if b, err := filepath.EvalSymlinks(netnsDir); err != nil || a != b {
			dirs = append(dirs, varNetnsDir)
		}
	}
	dirs = append(dirs, sysfsDir)
	var errs []error
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if err := unmountAndRemove(path); err != nil {
				errs = append(errs, err)
				continue
			}
			log.Info("removed a gang network namespace left behind", "path", path)
		}
	}
	return errors.Join(errs...)
}
