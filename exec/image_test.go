package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testImage builds, without any image tooling, a two-layer busybox image
// in overlay format, owned on the host by base plus the owner inside:
//
//	bottom: /bin/busybox and its applets (symlinks), /bin/bb-hardlink (a
//	        hard link), /etc/passwd, /etc/group, /etc/gone, /stuff/a,
//	        /root, /home/worker (owned by 1000), /opt/app, /tmp, /mnt
//	top:    /etc/gone whited out (a 0/0 character device), /etc/two,
//	        /stuff opaque with only /stuff/b
func testImage(t testing.TB, base uint32) []string {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install -y busybox-static)")
	}
	dir := t.TempDir()
	bottom, top := filepath.Join(dir, "layer0"), filepath.Join(dir, "layer1")
	for _, d := range []string{"bin", "etc", "stuff", "root", "home/worker", "opt/app", "tmp", "mnt", "proc", "dev", "sys"} {
		must(t, os.MkdirAll(filepath.Join(bottom, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(bottom, "root"), 0o700))
	must(t, os.Chmod(filepath.Join(bottom, "tmp"), 0o777|os.ModeSticky))
	b, err := os.ReadFile(busybox)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(bottom, "bin/busybox"), b, 0o755))
	must(t, os.Link(filepath.Join(bottom, "bin/busybox"), filepath.Join(bottom, "bin/bb-hardlink")))
	list, err := exec.Command(busybox, "--list").Output()
	must(t, err)
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			must(t, os.Symlink("busybox", filepath.Join(bottom, "bin", applet)))
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nworker:x:1000:1000:worker:/home/worker:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\n",
		"etc/group":  "root:x:0:\nworkers:x:1000:\nextra:x:2000:worker\n",
		"etc/gone":   "deleted in the top layer\n",
		"stuff/a":    "hidden by the opaque top\n",
	}
	for name, content := range files {
		must(t, os.WriteFile(filepath.Join(bottom, name), []byte(content), 0o644))
	}

	must(t, os.MkdirAll(filepath.Join(top, "etc"), 0o755))
	must(t, os.MkdirAll(filepath.Join(top, "stuff"), 0o755))
	must(t, unix.Mknod(filepath.Join(top, "etc/gone"), unix.S_IFCHR|0o000, 0))
	must(t, os.WriteFile(filepath.Join(top, "etc/two"), []byte("from the top layer\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(top, "stuff/b"), []byte("b\n"), 0o644))
	must(t, unix.Setxattr(filepath.Join(top, "stuff"), "trusted.overlay.opaque", []byte("y"), 0))

	for _, layer := range []string{bottom, top} {
		must(t, filepath.WalkDir(layer, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			id := int(base)
			if strings.Contains(p, "home/worker") {
				id += 1000
			}
			return os.Lchown(p, id, id)
		}))
	}
	return []string{top, bottom}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// imageSpec is a job running script with the image's sh.
func imageSpec(t testing.TB, base string, layers []string, script string) Spec {
	t.Helper()
	s := testSpec(t, base, "")
	s.Command = []string{"/bin/sh", "-c", script}
	s.Image = &ImageRoot{Layers: layers}
	return s
}

// assertNoMounts checks that no image root is left mounted.
func assertNoMounts(t testing.TB, r *Runner) {
	t.Helper()
	if m, err := mountedUnder(r.mountRoot); err != nil || len(m) > 0 {
		t.Errorf("mounts left: %v %v", m, err)
	}
}

func TestImageJobs(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	base := t.TempDir()

	// A host file only root may read, offered to the job as an input.
	secret := filepath.Join(base, "secret")
	must(t, os.WriteFile(secret, []byte("host secret"), 0o600))

	cases := []struct{ name, script string }{
		{"image files and layers", `cat /etc/two && test ! -e /etc/gone && test -e /stuff/b && test ! -e /stuff/a && test "$(stat -c %h /bin/bb-hardlink)" = 2 && test "$(stat -c %i /bin/busybox)" = "$(stat -c %i /bin/bb-hardlink)"`},
		{"no host system", `test ! -e /usr/bin/apt && test ! -e /usr && test ! -e /etc/shadow`},
		{"root inside", `test "$(id -u):$(id -g)" = 0:0 && test "$HOME" = /root && touch /root/x && test "$PWD" = /`},
		{"root-only host file unreadable", `if cat /in/secret; then echo read it; exit 1; fi`},
		{"root is read-only", `if touch /newfile 2>/tmp/err; then exit 1; fi; cat /tmp/err; grep -q "Read-only" /tmp/err`},
		{"mount denied", `if mount -t tmpfs x /mnt 2>/tmp/err; then echo mounted; exit 1; fi; cat /tmp/err; grep -Eqi "not permitted|permission denied" /tmp/err`},
		{"module loading denied", `if insmod /bin/busybox 2>/tmp/err; then exit 1; fi; cat /tmp/err; grep -q "not permitted" /tmp/err`},
		{"unshare denied", `if unshare -U true 2>/tmp/err; then exit 1; fi; cat /tmp/err; grep -q "not permitted" /tmp/err`},
		{"no capabilities", `grep -q 'CapEff:	0000000000000000' /proc/self/status && grep -q 'CapBnd:	0000000000000000' /proc/self/status && grep -q 'NoNewPrivs:	1' /proc/self/status && grep -q 'Seccomp:	2' /proc/self/status`},
		{"only loopback", `test "$(ls /sys/class/net)" = lo`},
		{"tmp writable", `echo x > /tmp/f && test "$(stat -c %a /tmp)" = 1777`},
	}
	t.Run("jobs", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				s := imageSpec(t, base+"/"+strings.ReplaceAll(c.name, " ", "-"), layers, c.script)
				s.Inputs = []Mount{{Source: secret, Target: "/in/secret"}}
				res := runJob(t, context.Background(), r, s)
				wantOutcome(t, res, Completed, ByJob)
			})
		}
	})
	assertNoMounts(t, r)
}

func TestImageOutputAndCheckpoint(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	s := imageSpec(t, "", layers, `echo result > /out/r.txt && cat /ckpt/state && echo step2 > /ckpt/state && echo more > /ckpt/sub/new`)
	ckpt := filepath.Join(s.Dir, "ckpt")
	// A resumed job's last checkpoint, laid out by the daemon as root.
	must(t, os.MkdirAll(filepath.Join(ckpt, "sub"), 0o700))
	must(t, os.WriteFile(filepath.Join(ckpt, "state"), []byte("step1\n"), 0o600))
	must(t, os.Symlink("/etc/shadow", filepath.Join(ckpt, "link")))
	s.Checkpoint = &Mount{Source: ckpt, Target: "/ckpt"}
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	if got := readFile(t, res.Stdout); got != "step1\n" {
		t.Errorf("stdout %q", got)
	}
	for name, want := range map[string]string{"out/r.txt": "result\n", "ckpt/state": "step2\n", "ckpt/sub/new": "more\n"} {
		p := filepath.Join(s.Dir, name)
		if got := readFile(t, p); got != want {
			t.Errorf("%s: %q", name, got)
		}
		var st syscall.Stat_t
		must(t, syscall.Stat(p, &st))
		if st.Uid != r.uidBase || st.Gid != r.uidBase {
			t.Errorf("%s owned by %d:%d, want the mapped root %d", name, st.Uid, st.Gid, r.uidBase)
		}
	}
	// The hand-over did not follow the link to the host's shadow file.
	var st syscall.Stat_t
	must(t, syscall.Stat("/etc/shadow", &st))
	if st.Uid != 0 {
		t.Errorf("/etc/shadow owned by %d", st.Uid)
	}
}

func TestImageConfig(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	cfg := ImageConfig{
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{`echo "$(id -u):$(id -g) $PWD $HOME $FOO $BAR" > /out/who; touch "$HOME/x"`},
		Env:        []string{"FOO=image", "BAR=image", "PATH=/bin"},
		WorkingDir: "/opt/app",
		User:       "worker:extra",
	}
	t.Run("image command", func(t *testing.T) {
		s := imageSpec(t, "", layers, "")
		s.Command = nil
		s.Env = map[string]string{"BAR": "job"}
		s.Image.Config = cfg
		res := runJob(t, context.Background(), r, s)
		wantOutcome(t, res, Completed, ByJob)
		if got := readFile(t, filepath.Join(s.Output.Source, "who")); got != "1000:2000 /opt/app /home/worker image job\n" {
			t.Errorf("got %q", got)
		}
		var st syscall.Stat_t
		must(t, syscall.Stat(filepath.Join(s.Output.Source, "who"), &st))
		if st.Uid != r.uidBase+1000 || st.Gid != r.uidBase+2000 {
			t.Errorf("output owned by %d:%d", st.Uid, st.Gid)
		}
	})
	t.Run("job command replaces entrypoint and cmd", func(t *testing.T) {
		s := imageSpec(t, "", layers, "")
		s.Command = []string{"echo", "replaced"}
		s.Image.Config = cfg
		res := runJob(t, context.Background(), r, s)
		wantOutcome(t, res, Completed, ByJob)
		if got := readFile(t, res.Stdout); got != "replaced\n" {
			t.Errorf("stdout %q", got)
		}
	})
	t.Run("images unavailable", func(t *testing.T) {
		if err := r.ImageSupport(); err != nil {
			t.Fatalf("ImageSupport: %v", err)
		}
		broken := *r
		broken.imageErr = fmt.Errorf("%w: test", ErrNoImages)
		s := imageSpec(t, "", layers, "true")
		if _, err := broken.Run(context.Background(), s); !errors.Is(err, ErrNoImages) {
			t.Errorf("err %v, want ErrNoImages", err)
		}
		assertGone(t, r, s)
	})
	t.Run("unknown user", func(t *testing.T) {
		s := imageSpec(t, "", layers, "true")
		s.Image.Config.User = "ghost"
		_, err := r.Run(context.Background(), s)
		if !errors.Is(err, ErrSpec) || !errors.Is(err, ErrNoSuchUser) {
			t.Errorf("err %v, want ErrSpec and ErrNoSuchUser", err)
		}
		assertGone(t, r, s)
	})
	assertNoMounts(t, r)
}

// TestImageSweep leaves an image job as a crashed daemon would (its root
// mounted, its container running detached) and one crashed before the
// runtime started (root mounted, no container), and sweeps both.
func TestImageSweep(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	prepare := func(id string) Spec {
		s := imageSpec(t, "", layers, "sleep 60")
		s.ID = id
		s, err := s.withDefaults()
		must(t, err)
		must(t, prepareDirs(s))
		must(t, r.prepareSandbox(s, ContainerID(id), bundleDir(s.Dir)))
		return s
	}
	running, unstarted := prepare("sweep-image-running"), prepare("sweep-image-unstarted")
	// No pipes: the container would hold them open.
	cmd := r.rt.command(context.Background(), "run", "--detach", "--bundle", bundleDir(running.Dir), ContainerID(running.ID))
	if err := cmd.Run(); err != nil {
		t.Fatalf("run --detach: %v", err)
	}
	if m, _ := mountedUnder(r.mountRoot); len(m) != 2 {
		t.Fatalf("mounted: %v, want two roots", m)
	}
	t0 := time.Now()
	must(t, r.Sweep(context.Background(), func(string) bool { return false }))
	t.Logf("sweep took %v", time.Since(t0))
	assertGone(t, r, running)
	assertNoMounts(t, r)
	// Without a container, Sweep cannot know the lease directory; the
	// daemon's Cleanup of the dead lease removes the bundle, now safely.
	must(t, r.Cleanup(context.Background(), unstarted.ID, unstarted.Dir))
	assertGone(t, r, unstarted)
}

func TestImageCDI(t *testing.T) {
	r0 := newTestRunner(t)
	dir := t.TempDir()
	// Stand-ins for two GPUs and the control device: /dev/null's numbers
	// under other names.
	for _, n := range []string{"gpu0", "gpu1", "ctl"} {
		must(t, unix.Mknod(filepath.Join(dir, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, os.Chmod(filepath.Join(dir, n), 0o666))
	}
	specDir := filepath.Join(dir, "cdi")
	must(t, os.MkdirAll(specDir, 0o755))
	spec := fmt.Sprintf(`cdiVersion: "0.5.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    env: [GPU_SEEN=0]
    deviceNodes: [{path: /dev/nvidia0, hostPath: %[1]s/gpu0}]
- name: GPU-bbb
  containerEdits:
    env: [GPU_SEEN=1]
    deviceNodes: [{path: /dev/nvidia1, hostPath: %[1]s/gpu1}]
containerEdits:
  env: [CDI_SPEC=yes]
  deviceNodes: [{path: /dev/nvidiactl, hostPath: %[1]s/ctl}]
`, dir)
	must(t, os.WriteFile(filepath.Join(specDir, "nvidia.yaml"), []byte(spec), 0o644))

	r := *r0
	gpu, err := newGPUInjector([]string{specDir})
	must(t, err)
	r.gpu = gpu
	if got := r.GPUInjection(); !strings.HasPrefix(got, "cdi (1 specs in ") {
		t.Errorf("GPUInjection %q", got)
	}
	leased := []GPU{{Index: 1, UUID: "GPU-bbb", Minor: 1, Model: "stand-in"}}
	script := `ls -l /dev; test -c /dev/nvidia1 && test ! -e /dev/nvidia0 && test -c /dev/nvidiactl && echo x > /dev/nvidia1 && echo "$GPU_SEEN $CDI_SPEC $CUDA_VISIBLE_DEVICES" > /out/env`
	for _, image := range []bool{false, true} {
		t.Run(fmt.Sprintf("image=%v", image), func(t *testing.T) {
			s := testSpec(t, "", script)
			if image {
				s = imageSpec(t, "", testImage(t, r.uidBase), script)
			}
			s.GPUs = leased
			res := runJob(t, context.Background(), &r, s)
			wantOutcome(t, res, Completed, ByJob)
			if got := readFile(t, filepath.Join(s.Output.Source, "env")); got != "1 yes GPU-bbb\n" {
				t.Errorf("env %q", got)
			}
		})
	}

	// Without a spec: simulated GPUs get the environment only, a real
	// one takes the driver's nodes (absent here, so the run is refused).
	none, err := newGPUInjector([]string{filepath.Join(dir, "none")})
	must(t, err)
	r.gpu = none
	if names := none.cdiNames(leased); names != nil {
		t.Errorf("names %v without a spec", names)
	}
	sim, err := ParseSimSpec("1xH100:80GiB", "12D3KooWtest")
	must(t, err)
	s := imageSpec(t, "", testImage(t, r.uidBase), `ls /dev/nvidia* 2>/dev/null && exit 1; test "$CUDA_VISIBLE_DEVICES" = `+sim[0].UUID)
	s.GPUs = sim
	wantOutcome(t, runJob(t, context.Background(), &r, s), Completed, ByJob)
	assertNoMounts(t, &r)
}

// TestPython runs Debian's python3 under the seccomp allow-list, with
// threads, subprocesses and sockets on loopback.
func TestPython(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 on this host")
	}
	r := newTestRunner(t)
	s := testSpec(t, "", "")
	s.Command = []string{"/usr/bin/python3", "-c", `
import json, os, socket, subprocess, threading, tempfile, multiprocessing
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); a, _ = srv.accept(); c.sendall(b"hi"); assert a.recv(2) == b"hi"
t = threading.Thread(target=lambda: None); t.start(); t.join()
assert subprocess.run(["/bin/true"]).returncode == 0
with multiprocessing.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]
with tempfile.NamedTemporaryFile() as f: f.write(b"x")
print(json.dumps({"ok": True}))
`}
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	if got := readFile(t, res.Stdout); got != "{\"ok\": true}\n" {
		t.Errorf("stdout %q", got)
	}
}

// BenchmarkImageStart compares a warm start of an image job (layers
// already unpacked) with a job on the host's root, alternating the two in
// one loop so that both see the same load: host-ms and image-ms are whole
// runs of /bin/true (bundle, runtime, job, teardown), added-ms what the
// overlay, the skeleton and the user namespace add.
func BenchmarkImageStart(b *testing.B) {
	r := newTestRunner(b)
	layers := testImage(b, r.uidBase)
	host := testSpec(b, "", "")
	host.Command = []string{"/bin/true"}
	image := testSpec(b, "", "")
	image.ID += "-image"
	image.Command = []string{"/bin/true"}
	image.Image = &ImageRoot{Layers: layers}
	var took [2]time.Duration
	for b.Loop() {
		for i, s := range []Spec{host, image} {
			t0 := time.Now()
			res, err := r.Run(context.Background(), s)
			if err != nil || res.Outcome != Completed {
				b.Fatalf("%v %+v", err, res)
			}
			took[i] += time.Since(t0)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(took[0]), "host-ms")
	b.ReportMetric(ms(took[1]), "image-ms")
	b.ReportMetric(ms(took[1]-took[0]), "added-ms")
	b.ReportMetric(0, "ns/op")
}

// A job with a disk writes its root as `docker run` lets it: into its
// image's folders, over and around the image's files, within its disk's
// quota, and leaving the layers as they were.
func TestImageRootWritableOnItsDisk(t *testing.T) {
	r := newTestRunner(t)
	needDisks(t)
	layers := testImage(t, r.uidBase)
	base := t.TempDir()
	script := `set -e
test "$(stat -c %u:%g:%a /)" = 0:0:755
echo log > /opt/app/log.txt && mkdir -p /var/cache/x && echo new > /newfile
echo changed > /etc/two && rm /stuff/b && test ! -e /stuff/b
cat /opt/app/log.txt /newfile /etc/two > /out/seen`
	s := onDisk(t, imageSpec(t, filepath.Join(base, "writes"), layers, script), 64<<20)
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	if got := readFile(t, filepath.Join(s.Disk.Path, "out", "seen")); got != "log\nnew\nchanged\n" {
		t.Errorf("the job saw %q", got)
	}
	// The layers, shared by every job of the image, are untouched.
	if got := readFile(t, filepath.Join(layers[0], "etc/two")); got != "from the top layer\n" {
		t.Errorf("top layer's /etc/two is now %q", got)
	}
	for _, p := range []string{filepath.Join(layers[0], "stuff/b"), filepath.Join(layers[1], "opt/app")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("layer lost %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(layers[1], "opt/app/log.txt")); !os.IsNotExist(err) {
		t.Errorf("the job's file landed in a layer: %v", err)
	}
	assertNoMounts(t, r)

	// What it writes there counts against its disk.
	hog := onDisk(t, imageSpec(t, filepath.Join(base, "hog"), layers, `dd if=/dev/zero of=/opt/app/big bs=1M count=200`), 64<<20)
	res = runJob(t, context.Background(), r, hog)
	wantOutcome(t, res, Failed, ByJob)
	if !res.DiskFull {
		t.Errorf("a job filling its root: reason %q, not a full disk", res.Reason)
	}
	// Without a disk, the root stays read-only (TestImageJobs).
}
