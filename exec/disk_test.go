package exec

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needDisks skips (or, with E31_REQUIRE_RUNC=1, fails) where disks cannot
// be made.
func needDisks(t testing.TB) {
	t.Helper()
	if err := DiskSupport(); err != nil {
		if os.Getenv("E31_REQUIRE_RUNC") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// onDisk is s with its writable directories on a new disk of bytes.
func onDisk(t testing.TB, s Spec, bytes uint64) Spec {
	t.Helper()
	lease := filepath.Dir(s.Dir) // testSpec's lease directory
	d, err := MountDisk(context.Background(), lease, bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := RemoveDisk(lease); err != nil {
			t.Error(err)
		}
	})
	s.Disk = &d
	s.Output.Source = filepath.Join(d.Path, "out")
	return s
}

// syncFS writes back the file system that holds path.
func syncFS(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

func TestDiskGivesExactlyItsQuota(t *testing.T) {
	needDisks(t)
	t.Run("mkfs", func(t *testing.T) { testDiskQuota(t, DiskMaker{}) })
	t.Run("template", func(t *testing.T) {
		m := DiskMaker{Templates: filepath.Join(t.TempDir(), "templates")}
		testDiskQuota(t, m) // makes the templates
		testDiskQuota(t, m) // uses them
	})
}

func testDiskQuota(t *testing.T, m DiskMaker) {
	dir := t.TempDir()
	for _, size := range []uint64{64 << 20, 1 << 30} {
		d, err := m.Mount(context.Background(), dir, size)
		if err != nil {
			t.Fatal(err)
		}
		avail, err := d.available()
		if err != nil {
			t.Fatal(err)
		}
		if avail != size {
			t.Errorf("disk of %d bytes lets a job write %d", size, avail)
		}
		img, err := os.Stat(filepath.Join(dir, diskImage))
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Stat(filepath.Join(dir, diskImage), &st)
		if used := uint64(st.Blocks) * 512; used > 8<<20 {
			t.Errorf("a fresh disk of %d bytes (file %d) takes %d bytes on the host", size, img.Size(), used)
		}
		if err := RemoveDisk(dir); err != nil {
			t.Fatal(err)
		}
		if m, _ := mountedUnder(dir); len(m) > 0 {
			t.Fatalf("still mounted: %v", m)
		}
		if _, err := os.Stat(filepath.Join(dir, diskImage)); !os.IsNotExist(err) {
			t.Fatalf("image left: %v", err)
		}
	}
}

// Disks copied from one template are each an empty filesystem of their
// own: what one job writes, the next does not see.
func TestDisksFromATemplateAreSeparate(t *testing.T) {
	needDisks(t)
	m := DiskMaker{Templates: filepath.Join(t.TempDir(), "templates")}
	a, b := t.TempDir(), t.TempDir()
	da, err := m.Mount(context.Background(), a, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveDisk(a)
	if err := os.WriteFile(filepath.Join(da.Path, "secret"), []byte("a's"), 0o600); err != nil {
		t.Fatal(err)
	}
	syncFS(t, da.Path)
	db, err := m.Mount(context.Background(), b, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer RemoveDisk(b)
	entries, err := os.ReadDir(db.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "lost+found" && e.Name() != diskPad {
			t.Errorf("a new disk holds %s", e.Name())
		}
	}
	tmpl, err := os.ReadDir(m.Templates)
	if err != nil || len(tmpl) != 1 {
		t.Fatalf("templates: %v, %v; want one for the one size", tmpl, err)
	}
}

// TestDiskQuota: a job that writes past its quota fails, the job's doing,
// with the quota named; a neighbour on its own disk completes; the host
// loses no more than the quota; nothing stays mounted.
func TestDiskQuota(t *testing.T) {
	r := newTestRunner(t)
	needDisks(t)
	const quota = 64 << 20
	base := t.TempDir()

	hog := onDisk(t, testSpec(t, filepath.Join(base, "hog"), "dd if=/dev/zero of=/out/big bs=1M count=200"), quota)
	hog.ID += "-hog"
	tmpHog := onDisk(t, testSpec(t, filepath.Join(base, "tmp"), "dd if=/dev/zero of=/tmp/big bs=1M count=200"), quota)
	tmpHog.ID += "-tmp"
	neighbour := onDisk(t, testSpec(t, filepath.Join(base, "neighbour"), "dd if=/dev/zero of=/out/small bs=1M count=32 && echo ok"), quota)
	neighbour.ID += "-neighbour"

	var wg sync.WaitGroup
	results := make([]Result, 3)
	for i, s := range []Spec{hog, tmpHog, neighbour} {
		wg.Go(func() { results[i] = runJob(t, context.Background(), r, s) })
	}
	wg.Wait()
	for i, name := range []string{"output", "/tmp"} {
		res := results[i]
		wantOutcome(t, res, Failed, ByJob)
		if !res.DiskFull || !strings.Contains(res.Reason, "disk quota") {
			t.Errorf("job filling %s: reason %q, DiskFull %v", name, res.Reason, res.DiskFull)
		}
	}
	wantOutcome(t, results[2], Completed, ByJob)
	if results[2].DiskFull {
		t.Error("neighbour reported a full disk")
	}

	// What each disk costs the host is its file's blocks: the quota at
	// most, plus what the formatter and the file system's metadata wrote.
	for _, s := range []Spec{hog, tmpHog} {
		// Written back through the loop device first.
		syncFS(t, s.Disk.Path)
		img := filepath.Join(filepath.Dir(s.Dir), diskImage)
		syncFS(t, img)
		var st unix.Stat_t
		if err := unix.Stat(img, &st); err != nil {
			t.Fatal(err)
		}
		if used := uint64(st.Blocks) * 512; used+2<<20 < quota || used > quota+8<<20 {
			t.Errorf("a full disk of %d bytes takes %d bytes on the host", quota, used)
		}
	}
	big, err := os.Stat(filepath.Join(hog.Disk.Path, "out", "big"))
	if err != nil {
		t.Fatal(err)
	}
	if big.Size() > quota {
		t.Errorf("job wrote %d bytes with a quota of %d", big.Size(), quota)
	}
}

func TestDiskSpecMustHoldWritableMounts(t *testing.T) {
	s := testSpec(t, "", "true")
	s.Disk = &Disk{Path: filepath.Join(filepath.Dir(s.Dir), "disk"), Bytes: 1 << 20}
	if _, err := s.withDefaults(); err == nil || !strings.Contains(err.Error(), "not on the job's disk") {
		t.Fatalf("output off the disk accepted: %v", err)
	}
	s.Output.Source = filepath.Join(s.Disk.Path, "out")
	if _, err := s.withDefaults(); err != nil {
		t.Fatal(err)
	}
	s.Checkpoint = &Mount{Source: filepath.Join(filepath.Dir(s.Dir), "ckpt"), Target: "/ckpt"}
	if _, err := s.withDefaults(); err == nil {
		t.Fatal("checkpoint off the disk accepted")
	}
}

func TestSweepDisks(t *testing.T) {
	needDisks(t)
	root := t.TempDir()
	for _, lease := range []string{"a", "b", "live"} {
		if _, err := MountDisk(context.Background(), filepath.Join(root, lease), 16<<20); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { RemoveDisk(filepath.Join(root, "live")) })
	// As a reboot leaves it: an image and no mount.
	if err := unix.Unmount(filepath.Join(root, "b", diskMount), 0); err != nil {
		t.Fatal(err)
	}
	if err := SweepDisks(root, func(name string) bool { return name == "live" }); err != nil {
		t.Fatal(err)
	}
	if m, _ := mountedUnder(root); len(m) != 1 || m[0] != filepath.Join(root, "live", diskMount) {
		t.Fatalf("mounted after the sweep: %v, want only the live lease's disk", m)
	}
	for _, lease := range []string{"a", "b"} {
		for _, name := range []string{diskImage, diskMount} {
			if _, err := os.Lstat(filepath.Join(root, lease, name)); !os.IsNotExist(err) {
				t.Errorf("%s/%s left: %v", lease, name, err)
			}
		}
	}
}

// BenchmarkMountDisk is the cost a disk adds to a job's start and end.
// It is measured formatting each disk (mkfs) and copying a template
// (DiskMaker, as a provider does); the template is made before the loop.
func BenchmarkMountDisk(b *testing.B) {
	needDisks(b)
	for _, c := range []struct {
		name string
		m    DiskMaker
	}{{"mkfs", DiskMaker{}}, {"template", DiskMaker{Templates: filepath.Join(b.TempDir(), "templates")}}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			if c.m.Templates != "" {
				if _, err := c.m.template(context.Background(), diskImageSize(10<<30)); err != nil {
					b.Fatal(err)
				}
			}
			var ru0, ru1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_CHILDREN, &ru0)
			var self0, self1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &self0)
			for b.Loop() {
				if _, err := c.m.Mount(context.Background(), dir, 10<<30); err != nil {
					b.Fatal(err)
				}
				if err := RemoveDisk(dir); err != nil {
					b.Fatal(err)
				}
			}
			unix.Getrusage(unix.RUSAGE_CHILDREN, &ru1)
			unix.Getrusage(unix.RUSAGE_SELF, &self1)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric((cpuMs(ru0, ru1)+cpuMs(self0, self1))/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkSandboxStartOnDisk is BenchmarkSandboxStart with and without a
// disk of the default 10GiB made and removed around each run, in CPU
// (this process and its children: runc, mkfs.ext4) as well as wall time.
func BenchmarkSandboxStartOnDisk(b *testing.B) {
	r := newTestRunner(b)
	needDisks(b)
	for _, withDisk := range []bool{false, true} {
		name := "tmpfs"
		if withDisk {
			name = "disk"
		}
		b.Run(name, func(b *testing.B) {
			base := b.TempDir()
			var self0, self1, kids0, kids1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &self0)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &kids0)
			for b.Loop() {
				s := testSpec(b, base, "")
				s.Command = []string{"true"}
				if withDisk {
					d, err := MountDisk(context.Background(), base, 10<<30)
					if err != nil {
						b.Fatal(err)
					}
					s.Disk = &d
					s.Output.Source = filepath.Join(d.Path, "out")
				}
				res, err := r.Run(context.Background(), s)
				if err != nil || res.Outcome != Completed {
					b.Fatalf("%v %+v", err, res)
				}
				if withDisk {
					if err := RemoveDisk(base); err != nil {
						b.Fatal(err)
					}
				}
			}
			unix.Getrusage(unix.RUSAGE_SELF, &self1)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &kids1)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric((cpuMs(self0, self1)+cpuMs(kids0, kids1))/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuMs is the user and system CPU, in milliseconds, between two rusage
// readings.
func cpuMs(a, z unix.Rusage) float64 {
	return float64((z.Utime.Nano()+z.Stime.Nano())-(a.Utime.Nano()+a.Stime.Nano())) / 1e6
}

// TestManyDisksAtOnce: disks started together, as a provider's jobs and
// those of the other daemons on a host are, each get a loop device of
// their own.
func TestManyDisksAtOnce(t *testing.T) {
	needDisks(t)
	const n = 12
	base := t.TempDir()
	var wg sync.WaitGroup
	paths := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			lease := filepath.Join(base, strconv.Itoa(i))
			d, err := MountDisk(context.Background(), lease, 32<<20)
			paths[i], errs[i] = d.Path, err
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range n {
			if err := RemoveDisk(filepath.Join(base, strconv.Itoa(i))); err != nil {
				t.Error(err)
			}
		}
	})
	devs := map[uint64]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("disk %d: %v", i, errs[i])
		}
		var st unix.Stat_t
		if err := unix.Stat(paths[i], &st); err != nil {
			t.Fatal(err)
		}
		if j, ok := devs[st.Dev]; ok {
			t.Fatalf("disks %d and %d share a device", j, i)
		}
		devs[st.Dev] = i
	}
}

// Waiting for the daemons' lock on loop-control, held by another daemon
// (here the test) for longer than BusyWait, is waiting in a queue: the
// disk is made once the lock is free, and the wait fails nothing.
func TestDiskWaitsForTheLoopLock(t *testing.T) {
	needDisks(t)
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if err := unix.Flock(int(ctl.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	const held = 500 * time.Millisecond
	m := DiskMaker{BusyWait: 50 * time.Millisecond}
	dir := filepath.Join(t.TempDir(), "lease")
	t.Cleanup(func() {
		if err := RemoveDisk(dir); err != nil {
			t.Error(err)
		}
	})
	type made struct {
		d   Disk
		err error
		at  time.Time
	}
	done := make(chan made, 1)
	start := time.Now()
	go func() {
		d, err := m.Mount(context.Background(), dir, 32<<20)
		done <- made{d, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("disk made while another held the lock: %+v", r)
	case <-time.After(held):
	}
	if err := unix.Flock(int(ctl.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("after waiting %s for the lock: %v", r.at.Sub(start).Round(time.Millisecond), r.err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.d.Path, &st); err != nil || st.Type != unix.EXT4_SUPER_MAGIC {
		t.Fatalf("%s is not the disk's ext4 (type %#x, %v)", r.d.Path, st.Type, err)
	}
}
