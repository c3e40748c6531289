package exec

import (
	"bufio"
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

// What a job sees of the host beyond its own mounts is cut down in three
// more ways than runc's defaults, each added to a run's config by limitHost:
//
//   - Masked paths (hostMasks): besides runc's, /proc/diskstats (every
//     disk's I/O, which tells what the host and other tenants do, and
//     when), DMI (/sys/class/dmi, /sys/devices/virtual/dmi and, under
//     the /sys/firmware mask, /sys/firmware/dmi: the machine's make,
//     serial numbers and asset tags) and the powercap energy counters.
//   - The driver's /proc entries of GPUs the job does not hold
//     (/proc/driver/nvidia/gpus/<PCI address>), each masked: a job sees
//     only its own, as nvidia-container-toolkit arranges. The names of
//     the others' folders stay listed, empty: runc will not mount
//     anything but a mask under /proc, so the folder cannot be replaced
//     by one holding only the job's.
//   - Block I/O: a weight of half the default share where the host's
//     cgroups can weigh I/O, and a bandwidth and IOPS limit on the job's
//     own disk (its loop device), so that what the job reads and writes
//     there, direct I/O included, cannot take all of the host disk the
//     loop device's file lies on from the daemon's synced writes.

// hostMasks are the paths masked in every sandbox: runc's default spec's,
// and what doc.go and the comment above give reasons for.
var hostMasks = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/proc/diskstats",
	"/sys/firmware", "/sys/class/dmi", "/sys/devices/virtual/dmi",
	"/sys/devices/virtual/powercap",
}

// gpuProcDir is where the NVIDIA driver lists its GPUs in /proc, one
// folder per GPU named by its PCI address.
const gpuProcDir = "/proc/driver/nvidia/gpus"

// Defaults of RunnerOptions.DiskBandwidth and DiskIOPS: what a job may
// read and, apart, write per second on its own disk. A job writing a
// checkpoint of 10 GiB takes 40s at this rate; a host whose disk is
// slower than a few times this should set lower ones.
const (
	DefaultDiskBandwidth = 256 << 20
	DefaultDiskIOPS      = 4000
)

// limitHost adds to cfg, the config of a run of s, the masks and I/O
// limits above.
func (r *Runner) limitHost(cfg *specs.Spec, s Spec) error {
	others, err := otherGPUEntries(r.host.gpuProc, s.GPUs)
	if err != nil {
		return err
	}
	cfg.Linux.MaskedPaths = append(cfg.Linux.MaskedPaths, others...)
	io, err := blockIO(r.host.cgroups.io, s.Disk, r.diskIO)
	if err != nil {
		return err
	}
	cfg.Linux.Resources.BlockIO = io
	return nil
}

// otherGPUEntries lists, as paths inside the sandbox, the entries of dir
// (the host's gpuProcDir; "" or missing: none, as with simulated GPUs)
// that are not one of gpus. An entry is a leased GPU's when its
// information file names the GPU's UUID, or, for a real GPU, its device
// minor; an entry that cannot be read is someone else's.
func otherGPUEntries(dir string, gpus []GPU) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GPU entries: %w", err)
	}
	var others []string
	for _, e := range entries {
		uuid, minor := gpuEntry(filepath.Join(dir, e.Name(), "information"))
		held := slices.ContainsFunc(gpus, func(g GPU) bool {
			return uuid != "" && strings.EqualFold(g.UUID, uuid) || uuid == "" && !g.Simulated && minor >= 0 && g.Minor == minor
		})
		if !held {
			others = append(others, path.Join(gpuProcDir, e.Name()))
		}
	}
	return others, nil
}

// gpuEntry reads the GPU UUID and the device minor from a driver's
// information file ("GPU UUID: \t GPU-…", "Device Minor: \t 0"); "" and -1
// where it does not say.
func gpuEntry(name string) (uuid string, minor int) {
	minor = -1
	f, err := os.Open(name)
	if err != nil {
		return "", -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "GPU UUID":
			uuid = v
		case "Device Minor":
			if n, err := strconv.Atoi(v); err == nil {
				minor = n
			}
		}
	}
	return uuid, minor
}

// ioSupport is what the host's cgroups can do with a job's block I/O.
type ioSupport struct {
	// weight is the runtime-spec weight that gives a job half the
	// default share through whichever file the runtime will write, 0
	// where there is none: BFQ's blkio.bfq.weight or io.bfq.weight (the
	// value as given; default 100), cgroup v1's CFQ blkio.weight (as
	// given; default 500) or v2's io.weight (which runc converts from
	// the v1 scale: 15 becomes 51; default 100).
	weight uint16
	// throttle is whether bandwidth and IOPS can be limited per device
	// (blkio.throttle.* on v1, io.max on v2).
	throttle bool
}

// detectIO finds what the host's cgroups offer for block I/O. A file the
// runtime would write and the kernel lacks fails the container, so only
// what is seen is used: on v2, in a child of the root cgroup (the root
// has no io files).
func detectIO(c cgroupLayout) ioSupport {
	has := func(root string, names ...string) string {
		dirs := []string{root}
		if entries, err := os.ReadDir(root); err == nil {
			for _, e := range entries {
				if e.IsDir() {
					dirs = append(dirs, filepath.Join(root, e.Name()))
				}
			}
		}
		for _, n := range names {
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					return n
				}
			}
		}
		return ""
	}
	var io ioSupport
	// Each version's file that says the host can throttle, its BFQ weight
	// file and its plain weight file with the weight that halves a share.
	root, throttle, bfq, plain, plainWeight := c.v2(), "io.max", "io.bfq.weight", "io.weight", uint16(15)
	if !c.unified {
		root, throttle, bfq, plain, plainWeight = c.v1("blkio"), "blkio.throttle.write_bps_device", "blkio.bfq.weight", "blkio.weight", 250
		if root == "" {
			return io
		}
	}
	io.throttle = has(root, throttle) != ""
	switch has(root, bfq, plain) {
	case bfq:
		io.weight = 50
	case plain:
		io.weight = plainWeight
	}
	return io
}

// diskIOLimit is what a job may read and, apart, write per second on its
// own disk; 0 is no limit.
type diskIOLimit struct{ bandwidth, iops uint64 }

// blockIO is the block I/O part of a run's resources: the weight where
// the host has one, and the limits on its disk's device where it has a
// disk and the host can throttle; nil for neither.
func blockIO(io ioSupport, d *Disk, limit diskIOLimit) (*specs.LinuxBlockIO, error) {
	var b specs.LinuxBlockIO
	if io.weight != 0 {
		w := io.weight
		b.Weight = &w
	}
	if d != nil && io.throttle {
		dev, err := diskDevice(d.Path)
		if err != nil {
			return nil, err
		}
		rate := func(v uint64) []specs.LinuxThrottleDevice {
			if v == 0 {
				return nil
			}
			return []specs.LinuxThrottleDevice{{LinuxBlockIODevice: dev, Rate: v}}
		}
		b.ThrottleReadBpsDevice, b.ThrottleWriteBpsDevice = rate(limit.bandwidth), rate(limit.bandwidth)
		b.ThrottleReadIOPSDevice, b.ThrottleWriteIOPSDevice = rate(limit.iops), rate(limit.iops)
	}
	if b.Weight == nil && b.ThrottleReadBpsDevice == nil && b.ThrottleReadIOPSDevice == nil {
		return nil, nil
	}
	return &b, nil
}

// diskDevice is the block device of the filesystem mounted at dir: a
// job's disk's loop device.
func diskDevice(dir string) (specs.LinuxBlockIODevice, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return specs.LinuxBlockIODevice{}, fmt.Errorf("disk device: %w", err)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return specs.LinuxBlockIODevice{}, fmt.Errorf("disk device: %w", err)
	}
	if st.Dev == parent.Dev {
		return specs.LinuxBlockIODevice{}, fmt.Errorf("disk device: %w: nothing is mounted at %s", ErrSpec, dir)
	}
	return specs.LinuxBlockIODevice{Major: int64(unix.Major(st.Dev)), Minor: int64(unix.Minor(st.Dev))}, nil
}
