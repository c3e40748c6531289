package exec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoDisks is wrapped by DiskSupport's error on a host where per-job
// disks cannot be made (no mkfs.ext4, no loop devices, not root).
var ErrNoDisks = errors.New("per-job disk quotas are not available on this host")

// Disk is a filesystem of its own for one job, of bounded size, mounted
// on the host (see doc.go, "Disk quota"). Everything the job can write
// lives in it: Spec.Disk puts /tmp there and requires the output and
// checkpoint directories to be inside it.
type Disk struct {
	// Path is where the filesystem is mounted.
	Path string
	// Bytes is what the job may write in all.
	Bytes uint64
}

// DiskReserve is room on a Disk that only the host's root may use, on top
// of Bytes: enough for the daemon to lay the job's kept logs (two of
// DefaultLogCap) beside an output that filled the rest.
const DiskReserve = 2*uint64(DefaultLogCap) + 4<<20

// Names inside the directory MountDisk is given.
const (
	diskImage = "disk.img"
	diskMount = "disk"
	diskPad   = ".quota-pad"
)

// DiskSupport returns nil when MountDisk can work here, else an error
// wrapping ErrNoDisks that says what is missing.
func DiskSupport() error {
	if _, err := osexec.LookPath("mkfs.ext4"); err != nil {
		return fmt.Errorf("%w: mkfs.ext4 not found (install e2fsprogs)", ErrNoDisks)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("%w: no /dev/loop-control (load the loop module)", ErrNoDisks)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting needs root", ErrNoDisks)
	}
	return nil
}

// MountDisk makes the disk of a job under dir: a sparse file dir/disk.img
// formatted ext4 and loop-mounted at dir/disk, in which non-root users can
// write bytes and no more. Only blocks actually written take room on the
// host. A disk left by an earlier run in dir is removed first. Undo it with
// RemoveDisk. Each disk is formatted anew; DiskMaker copies a formatted
// one instead.
func MountDisk(ctx context.Context, dir string, bytes uint64) (Disk, error) {
	return DiskMaker{}.Mount(ctx, dir, bytes)
}

// DiskMaker makes jobs' disks as MountDisk does, from a formatted image
// of each size kept in Templates: copying the few hundred KiB that the
// formatter writes costs a job's start far less than running it (see
// doc.go, "Disk quota"). Every disk of a size is then the same empty
// filesystem, UUID included, which nothing here reads.
type DiskMaker struct {
	// Templates holds one formatted image per disk size, made the first
	// time a size is asked for; on the same filesystem as the disks, so
	// that the copy stays in the kernel. "": format every disk.
	Templates string
	// BusyWait is how long a disk's start keeps trying for a loop device
	// that other software keeps taking first; 0: ten seconds.
	BusyWait time.Duration
}

// Mount is MountDisk, from a template when d has a Templates directory.
func (m DiskMaker) Mount(ctx context.Context, dir string, bytes uint64) (Disk, error) {
	if bytes == 0 {
		return Disk{}, fmt.Errorf("disk: %w: size 0", ErrSpec)
	}
	if err := RemoveDisk(dir); err != nil {
		return Disk{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Disk{}, fmt.Errorf("disk: %w", err)
	}
	img := filepath.Join(dir, diskImage)
	mnt := filepath.Join(dir, diskMount)
	size := diskImageSize(bytes)
	template := ""
	if m.Templates != "" {
		var err error
		if template, err = m.template(ctx, size); err != nil {
			return Disk{}, err
		}
		if err := copySparse(template, img, size); err != nil {
			// The kernel may refuse the copy (another filesystem, an
			// old kernel): format this one instead.
			os.Remove(img)
			template = ""
		}
	}
	if template == "" {
		if err := format(ctx, img, size); err != nil {
			return Disk{}, err
		}
	}
	if err := os.Mkdir(mnt, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		os.Remove(img)
		return Disk{}, fmt.Errorf("disk: %w", err)
	}
	if err := mountLoop(ctx, img, mnt, cmp.Or(m.BusyWait, loopWait)); err != nil {
		os.Remove(mnt)
		os.Remove(img)
		if template != "" {
			// A template that does not mount is made again next time.
			os.Remove(template)
		}
		return Disk{}, fmt.Errorf("disk: %w", err)
	}
	d := Disk{Path: mnt, Bytes: bytes}
	if err := d.pad(); err != nil {
		RemoveDisk(dir)
		return Disk{}, err
	}
	return d, nil
}

// DiskCost is the most the disk of a job given bytes can take on the
// host's filesystem: its image is sparse, but a job that writes, deletes
// and writes again can leave every block of it allocated.
func DiskCost(bytes uint64) uint64 { return diskImageSize(bytes) }

// DiskImage is the image file of the disk MountDisk makes under dir,
// whose allocated blocks are what the disk takes on the host now.
func DiskImage(dir string) string { return filepath.Join(dir, diskImage) }

// diskImageSize is the size of the image of a disk of bytes. ext4 keeps
// 1.6-3.2% for its own metadata and for delayed allocation; 1/16 more
// covers that, and what is left over beyond bytes is taken by the pad
// (Disk.pad).
func diskImageSize(bytes uint64) uint64 { return bytes + bytes/16 + DiskReserve + 16<<20 }

// format makes img a sparse file of size bytes holding an empty ext4.
func format(ctx context.Context, img string, size uint64) error {
	if err := makeSparse(img, size); err != nil {
		return err
	}
	reserved := strconv.FormatFloat(float64(DiskReserve)*100/float64(size), 'f', 4, 64)
	// No journal: the disk never outlives a crash. Lazy inode tables and
	// no discard: nothing is written that the job does not fill, which is
	// what keeps the cost per job start to a few milliseconds.
	mkfs := osexec.CommandContext(ctx, "mkfs.ext4", "-q", "-F",
		"-O", "^has_journal,^resize_inode",
		"-E", "lazy_itable_init=1,nodiscard,root_owner=0:0",
		"-m", reserved, img)
	if out, err := mkfs.CombinedOutput(); err != nil {
		os.Remove(img)
		return fmt.Errorf("disk: mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// template returns the formatted image of size bytes in m.Templates,
// making it first if there is none. Two starts that make it at once each
// format their own and the last rename wins: both are the same.
func (m DiskMaker) template(ctx context.Context, size uint64) (string, error) {
	path := filepath.Join(m.Templates, strconv.FormatUint(size, 10)+".img")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(m.Templates, 0o700); err != nil {
		return "", fmt.Errorf("disk template: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, rand.Uint64())
	if err := format(ctx, tmp, size); err != nil {
		return "", err
	}
	// Durable before it is named: a template that a crash left half
	// written would not mount (Mount then removes it).
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("disk template: %w", err)
	}
	return path, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("disk template: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("disk template: %w", err)
	}
	return nil
}

// copySparse makes dst a sparse file of size bytes holding src's data
// (src is no longer than size), copying only the ranges src has written,
// in the kernel.
func copySparse(src, dst string, size uint64) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer in.Close()
	if err := makeSparse(dst, size); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer out.Close()
	for off := int64(0); ; {
		start, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			return fmt.Errorf("disk: copy %s: %w", src, err)
		}
		end, err := unix.Seek(int(in.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("disk: copy %s: %w", src, err)
		}
		for rd, wr := start, start; rd < end; {
			n, err := unix.CopyFileRange(int(in.Fd()), &rd, int(out.Fd()), &wr, int(end-rd), 0)
			if err != nil {
				return fmt.Errorf("disk: copy %s: %w", src, err)
			}
			if n == 0 {
				return fmt.Errorf("disk: copy %s: it ended at %d, before %d", src, rd, end)
			}
		}
		off = end
	}
}

// makeSparse creates path as a file of size bytes with no blocks.
func makeSparse(path string, size uint64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	return nil
}

// pad takes, as root, whatever non-root users could write beyond d.Bytes,
// with a preallocated file: its extents are unwritten, so it costs the host
// nothing, and the job gets exactly its quota rather than the formatter's
// rounding.
func (d Disk) pad() error {
	avail, err := d.available()
	if err != nil {
		return err
	}
	if avail < d.Bytes {
		return fmt.Errorf("disk: formatted %d bytes for %d", avail, d.Bytes)
	}
	if avail == d.Bytes {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(d.Path, diskPad), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(avail-d.Bytes)); err != nil {
		return fmt.Errorf("disk: pad: %w", err)
	}
	return nil
}

// available is what non-root users can still write on d.
func (d Disk) available() (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.Path, &st); err != nil {
		return 0, fmt.Errorf("disk: %w", err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// full reports whether the job has used its quota up, to within the last
// few blocks that a write of any size cannot fit in.
func (d Disk) full() bool {
	avail, err := d.available()
	return err == nil && avail < 1<<20
}

// mountLoop attaches img to a free loop device with autoclear set and
// mounts it at target. Autoclear frees the device when the mount goes, so
// unmounting is the whole of the undo.
func mountLoop(ctx context.Context, img, target string, busyWait time.Duration) error {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	// GET_FREE hands every caller the same lowest free device until one
	// of them configures it: dozens of jobs starting at once, in one
	// daemon or in several on one host, would collide on it and starve
	// the unlucky. So the e31 daemons of a host take turns, holding an
	// flock on loop-control from GET_FREE to CONFIGURE (a millisecond or
	// two). Waiting for the lock is waiting in a queue, every holder
	// ahead making progress: the wait is blocking, so the kernel wakes a
	// waiter the moment the lock is free (polling, a daemon starved of
	// CPU kept missing it while busier ones took it again and again),
	// and it counts against nothing. Other software does not take the
	// lock: a device it takes first is tried again, after a short random
	// pause, until busyWait has passed since the first such collision.
	var firstBusy time.Time
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("loop device: %w", err)
		}
		if !firstBusy.IsZero() {
			if time.Since(firstBusy) > busyWait {
				return fmt.Errorf("loop device: every free one was taken first, for %s", busyWait)
			}
			pause := time.Duration(1+rand.IntN(min(attempt, 20))) * time.Millisecond
			select {
			case <-ctx.Done():
				return fmt.Errorf("loop device: %w", ctx.Err())
			case <-time.After(pause):
			}
		}
		if err := flockWait(ctl); err != nil {
			return fmt.Errorf("loop device: lock %s: %w", ctl.Name(), err)
		}
		lf, dev, err := configureFree(ctl, f)
		_ = unix.Flock(int(ctl.Fd()), unix.LOCK_UN)
		if errors.Is(err, unix.EBUSY) {
			if firstBusy.IsZero() {
				firstBusy = time.Now()
			}
			continue
		}
		if err != nil {
			return err
		}
		// The mount holds the device from here; closing ours after it
		// leaves autoclear to act on the unmount.
		err = unix.Mount(dev, target, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "")
		lf.Close()
		if err != nil {
			return fmt.Errorf("mount %s: %w", dev, err)
		}
		return nil
	}
}

// flockWait takes an exclusive flock on f, waiting for it as long as
// others hold it.
func flockWait(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// configureFree binds img to the lowest free loop device and returns it
// open, with its path; unix.EBUSY when another took it first.
func configureFree(ctl, img *os.File) (*os.File, string, error) {
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return nil, "", fmt.Errorf("loop device: %w", err)
	}
	dev := "/dev/loop" + strconv.Itoa(n)
	lf, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("loop device: %w", err)
	}
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	// Direct I/O: the job's writes are cached once, in the disk's own
	// page cache, not again in the image file's.
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
	copy(cfg.Info.File_name[:], diskImage)
	err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
	if errors.Is(err, unix.EINVAL) {
		// A file system under the image without direct I/O.
		cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
	}
	if errors.Is(err, unix.EBUSY) {
		lf.Close()
		return nil, "", err
	}
	if err != nil {
		lf.Close()
		return nil, "", fmt.Errorf("configure %s: %w", dev, err)
	}
	return lf, dev, nil
}

// loopWait is the default DiskMaker.BusyWait: how long a disk's start
// keeps trying for a loop device that other software keeps taking first.
const loopWait = 10 * time.Second

// RemoveDisk unmounts the disk under dir, if any, and deletes it with its
// mount point. Nothing is deleted through a mount. It is idempotent.
func RemoveDisk(dir string) error {
	mnt := filepath.Join(dir, diskMount)
	if _, err := os.Lstat(mnt); errors.Is(err, fs.ErrNotExist) {
		// Nothing is mounted where there is no directory: a new lease's
		// dir, as every Mount begins with, costs no read of the host's
		// mount table.
		return removeImage(dir)
	}
	mounted, err := mountedUnder(mnt)
	if err != nil {
		return fmt.Errorf("remove disk: %w", err)
	}
	for i := len(mounted) - 1; i >= 0; i-- {
		err := unix.Unmount(mounted[i], unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			// A process of the job still dying holds it: detach it now;
			// the kernel frees it, and the loop device, with the last
			// user.
			err = unix.Unmount(mounted[i], unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("remove disk: unmount %s: %w", mounted[i], err)
		}
	}
	// rmdir, not RemoveAll: a mount point still there is an error, never a
	// path into the job's files.
	if err := os.Remove(mnt); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove disk: %w", err)
	}
	return removeImage(dir)
}

func removeImage(dir string) error {
	if err := os.Remove(filepath.Join(dir, diskImage)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove disk: %w", err)
	}
	return nil
}

// SweepDisks removes every disk that MountDisk made in a directory
// directly under root, mounted or not, unless keep says that directory's
// name is a lease still live: after a crash or a reboot, no disk of the
// leases before it is in use.
func SweepDisks(root string, keep func(name string) bool) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep disks: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || keep(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		for _, name := range []string{diskImage, diskMount} {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				errs = append(errs, RemoveDisk(dir))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// diskTmp is the host directory of the job's /tmp on its disk.
func diskTmp(d Disk) string { return filepath.Join(d.Path, "tmp") }

// makeDiskTmp creates the job's /tmp on its disk, empty and open to all as
// a /tmp is.
func makeDiskTmp(d Disk) error {
	p := diskTmp(d)
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("disk /tmp: %w", err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("disk /tmp: %w", err)
	}
	// Chmod, not the umask-filtered mode of Mkdir.
	if err := os.Chmod(p, 0o777|fs.ModeSticky); err != nil {
		return fmt.Errorf("disk /tmp: %w", err)
	}
	return nil
}
