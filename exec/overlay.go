package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// An image job's root is an overlay mounted by the runner on the host
// before the runtime starts, under the runner's mount root:
//
//	<MountRoot>/<container id>/rootfs   the overlay
//	<MountRoot>/<container id>/lease    the lease ID, for Sweep
//
// A job with a disk gets a writable root, as `docker run` gives one: the
// overlay's upper layer is a directory on the job's disk (rootUpper), so
// request.disk bounds what the job writes there too, and the writes go
// with the disk. A job without a disk gets the layers alone, read-only.
//
// It lives outside the lease directory because the job's root user is an
// unprivileged uid on the host, and the runtime, running as that user in
// the job's user namespace, must walk to the root: every directory above
// it must be traversable by others, which a node's data directory need
// not be. Mount sources (inputs, output) are opened by the runtime before
// it enters the namespace, so they may stay private.
//
// The bottom lower layer is the bundle's skeleton: the mount points the
// sandbox needs (/proc, /dev, /tmp, /out, the inputs, driver library
// files) and a generated /etc/hosts. An overlay without an upper layer is
// read-only, so the runtime could not create them itself; and an overlay
// without an upper layer needs at least two lower ones, which the
// skeleton also guarantees for a single-layer image. It goes under the
// image, not over it, so that whatever the image has keeps its own owner,
// mode and symlinks (a directory on top would lend the merged directory
// its attributes, and replace a symlink such as /lib -> usr/lib); the
// skeleton only fills what the image lacks. A mount point that the image
// hides under a whiteout or an opaque directory stays hidden, and the
// runtime then fails to start the job.

// rootMount is where an image job's root is mounted.
type rootMount struct{ dir string }

func (m rootMount) rootfs() string    { return filepath.Join(m.dir, "rootfs") }
func (m rootMount) leaseFile() string { return filepath.Join(m.dir, "lease") }

// rootUpper is where an image job's writes to its root go: the overlay's
// upper and work directories, on the job's disk.
type rootUpper struct{ upper, work string }

// makeRootUpper makes, afresh, the upper and work directories of an image
// root on disk d. The upper directory's own owner and mode become those of
// the merged /, so they are copied from top, the image's top layer.
func makeRootUpper(d Disk, top string) (*rootUpper, error) {
	base := filepath.Join(d.Path, "root")
	if err := os.RemoveAll(base); err != nil {
		return nil, fmt.Errorf("image root upper: %w", err)
	}
	u := &rootUpper{upper: filepath.Join(base, "upper"), work: filepath.Join(base, "work")}
	for _, dir := range []string{base, u.upper, u.work} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("image root upper: %w", err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(top, &st); err != nil {
		return nil, fmt.Errorf("image root upper: %w", err)
	}
	if err := os.Lchown(u.upper, int(st.Uid), int(st.Gid)); err != nil {
		return nil, fmt.Errorf("image root upper: %w", err)
	}
	if err := os.Chmod(u.upper, fs.FileMode(st.Mode&0o7777)); err != nil {
		return nil, fmt.Errorf("image root upper: %w", err)
	}
	return u, nil
}

// mountImageRoot mounts the overlay of lowers (top first) at m.rootfs(),
// writable through upper when it is not nil, read-only otherwise,
// recording the lease it belongs to first so that Sweep can tell whose a
// leftover is.
func mountImageRoot(m rootMount, lease string, lowers []string, upper *rootUpper) error {
	if err := os.MkdirAll(m.rootfs(), 0o711); err != nil {
		return fmt.Errorf("image root: %w", err)
	}
	for _, d := range []string{m.dir, m.rootfs()} {
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
	}
	if err := os.WriteFile(m.leaseFile(), []byte(lease), 0o600); err != nil {
		return fmt.Errorf("image root: %w", err)
	}
	if err := mountOverlay(m.rootfs(), lowers, upper); err != nil {
		return fmt.Errorf("image root: %w", err)
	}
	return nil
}

// mountOverlay mounts an overlay of lowers at target, read-only unless it
// has an upper layer. It uses the new mount API's "lowerdir+" (Linux 6.8),
// which takes each layer as its own string, so neither the number of
// layers nor a ':' or ',' in a path is limited by the one-page option
// string of mount(2); older kernels get mount(2).
func mountOverlay(target string, lowers []string, upper *rootUpper) error {
	err := mountOverlayFsconfig(target, lowers, upper)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, errLowerdirPlus) {
		return mountOverlayLegacy(target, lowers, upper)
	}
	return err
}

var errLowerdirPlus = errors.New("kernel without overlay lowerdir+")

// overlayAttrs: no setuid or device files of the image take effect, and
// without an upper layer, read-only.
const overlayAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

func mountOverlayFsconfig(target string, lowers []string, upper *rootUpper) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fsfd)
	for i, l := range lowers {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", l); err != nil {
			if i == 0 && errors.Is(err, unix.EINVAL) {
				return errLowerdirPlus
			}
			return fmt.Errorf("overlay layer %s: %w", l, err)
		}
	}
	attrs := overlayAttrs | unix.MOUNT_ATTR_RDONLY
	if upper != nil {
		for _, kv := range [][2]string{{"upperdir", upper.upper}, {"workdir", upper.work}} {
			if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
				return fmt.Errorf("overlay %s %s: %w", kv[0], kv[1], err)
			}
		}
		attrs = overlayAttrs
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("overlay of %d layers: %w", len(lowers), err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move overlay to %s: %w", target, err)
	}
	return nil
}

func mountOverlayLegacy(target string, lowers []string, upper *rootUpper) error {
	paths := lowers
	if upper != nil {
		paths = append(slices.Clone(lowers), upper.upper, upper.work)
	}
	for _, l := range paths {
		if strings.ContainsAny(l, ":,\\") {
			return fmt.Errorf("layer path %q has a character mount(2) cannot pass (kernel older than 6.8)", l)
		}
	}
	opts := "lowerdir=" + strings.Join(lowers, ":")
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_RDONLY)
	if upper != nil {
		opts += ",upperdir=" + upper.upper + ",workdir=" + upper.work
		flags = unix.MS_NOSUID | unix.MS_NODEV
	}
	if len(opts) >= os.Getpagesize() {
		return fmt.Errorf("%d layers do not fit in one mount(2) option page (kernel older than 6.8)", len(lowers))
	}
	if err := unix.Mount("overlay", target, "overlay", flags, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

// unmountImageRoot undoes mountImageRoot. The rootfs directory is removed
// with rmdir only, which fails on a mount point: whatever happens, nothing
// is ever deleted through the overlay into the image's layers.
func unmountImageRoot(m rootMount) error {
	if m.dir == "" {
		return nil // a runner without image support mounts nothing
	}
	if _, err := os.Lstat(m.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mounted, err := mountedUnder(m.dir)
	if err != nil {
		return fmt.Errorf("unmount image root: %w", err)
	}
	// Deepest first, in case something was mounted inside.
	slices.SortFunc(mounted, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range mounted {
		err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			// A process still holds it (the container's last one dying):
			// detach it from the tree now; the kernel frees it when the
			// last user goes.
			err = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount image root %s: %w", p, err)
		}
	}
	for _, p := range []string{m.rootfs(), m.leaseFile(), m.dir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove image root: %w", err)
		}
	}
	return nil
}

// skeletonEntry is a mount point or file the skeleton layer holds.
type skeletonEntry struct {
	path string // absolute, inside the root
	file bool   // a file mount point (a bind of a file), else a directory
	// mode of a directory: the mode option of a tmpfs mounted there,
	// since runc gives a tmpfs the mode of the directory it covers.
	mode fs.FileMode
}

// skeletonEntries lists the mount points the runtime will need on an
// image root: every mount's destination that no earlier mount contains
// (those are created inside that mount, which is writable or a tmpfs),
// the working directory, and /etc for the generated hosts file.
func skeletonEntries(cfg *specs.Spec) ([]skeletonEntry, error) {
	var out []skeletonEntry
	var seen []string
	add := func(p string, file bool, mode fs.FileMode) {
		for _, s := range seen {
			if p == s || strings.HasPrefix(p, s+"/") {
				return
			}
		}
		out = append(out, skeletonEntry{path: p, file: file, mode: mode})
	}
	for _, m := range cfg.Mounts {
		file, mode := false, fs.FileMode(0o755)
		if m.Type == "bind" {
			st, err := os.Stat(m.Source)
			if err != nil {
				return nil, fmt.Errorf("mount source %s: %w", m.Source, err)
			}
			file = !st.IsDir()
		}
		for _, o := range m.Options {
			if v, ok := strings.CutPrefix(o, "mode="); ok && m.Type == "tmpfs" {
				if n, err := strconv.ParseUint(v, 8, 32); err == nil {
					mode = fs.FileMode(n&0o777) | modeBits(n)
				}
			}
		}
		add(path.Clean(m.Destination), file, mode)
		seen = append(seen, path.Clean(m.Destination))
	}
	if cfg.Process.Cwd != "/" {
		add(cfg.Process.Cwd, false, 0o755)
	}
	return out, nil
}

// modeBits turns the sticky, setgid and setuid bits of a numeric mode
// into Go's.
func modeBits(n uint64) fs.FileMode {
	var m fs.FileMode
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	return m
}

// writeSkeleton creates the skeleton layer at dir, owned by the sandbox's
// root (uid and gid base on the host), so that directories it adds to the
// image look like the image's own inside.
func writeSkeleton(dir string, entries []skeletonEntry, hosts string, base uint32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("skeleton: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("skeleton: %w", err)
	}
	defer root.Close()
	all := append([]skeletonEntry{{path: "/etc"}}, entries...)
	for _, e := range all {
		rel := strings.TrimPrefix(e.path, "/")
		parent := path.Dir(rel)
		if e.file {
			if parent != "." {
				if err := root.MkdirAll(parent, 0o755); err != nil {
					return fmt.Errorf("skeleton %s: %w", e.path, err)
				}
			}
			f, err := root.OpenFile(rel, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("skeleton %s: %w", e.path, err)
			}
			f.Close()
		} else {
			if err := root.MkdirAll(rel, 0o755); err != nil {
				return fmt.Errorf("skeleton %s: %w", e.path, err)
			}
			if e.mode != 0 {
				if err := root.Chmod(rel, e.mode); err != nil {
					return fmt.Errorf("skeleton %s: %w", e.path, err)
				}
			}
		}
	}
	if err := root.WriteFile("etc/hosts", []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("skeleton: %w", err)
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(base), int(base))
	})
}
