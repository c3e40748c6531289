package exec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

const testPasswd = "root:x:0:0:root:/root:/bin/sh\n# comment\nworker:x:1000:1000::/home/worker:/bin/sh\nbroken:line\nodd:x:notanumber:1:::\n"
const testGroup = "root:x:0:\nworkers:x:1000:\nextra:x:2000:worker\n"

func TestResolveUser(t *testing.T) {
	cases := []struct {
		spec      string
		uid, gid  uint32
		home      string
		wantErr   error
		errSubstr string
	}{
		{spec: "", uid: 0, gid: 0, home: "/root"},
		{spec: "0", uid: 0, gid: 0, home: "/root"},
		{spec: "worker", uid: 1000, gid: 1000, home: "/home/worker"},
		{spec: "1000", uid: 1000, gid: 1000, home: "/home/worker"},
		{spec: "worker:extra", uid: 1000, gid: 2000, home: "/home/worker"},
		{spec: "worker:3", uid: 1000, gid: 3, home: "/home/worker"},
		{spec: "4242", uid: 4242, gid: 0},
		{spec: "4242:4243", uid: 4242, gid: 4243},
		{spec: "ghost", wantErr: ErrNoSuchUser},
		{spec: "worker:ghosts", wantErr: ErrNoSuchUser},
		{spec: "odd", wantErr: ErrSpec},
		{spec: "worker:", wantErr: ErrSpec},
		{spec: "70000", wantErr: ErrSpec, errSubstr: "beyond"},
		{spec: "0:65536", wantErr: ErrSpec},
	}
	for _, c := range cases {
		u, err := resolveUser(c.spec, []byte(testPasswd), []byte(testGroup))
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.errSubstr) {
				t.Errorf("%q: err %v, want %v", c.spec, err, c.wantErr)
			}
			continue
		}
		if err != nil || u.uid != c.uid || u.gid != c.gid || u.home != c.home {
			t.Errorf("%q: %+v %v, want %d:%d %s", c.spec, u, err, c.uid, c.gid, c.home)
		}
	}
	// An image without /etc/passwd: numbers only, root's home /root.
	if u, err := resolveUser("", nil, nil); err != nil || u.home != "/root" {
		t.Errorf("no passwd: %+v %v", u, err)
	}
	if u, _ := resolveUser("worker", []byte(testPasswd), []byte(testGroup)); !slices.Equal(u.groups, []uint32{2000}) {
		t.Errorf("supplementary groups %v, want [2000]", u.groups)
	}
	if _, err := resolveUser("worker", nil, nil); !errors.Is(err, ErrNoSuchUser) {
		t.Errorf("no passwd, named user: %v", err)
	}
}

// FuzzResolveUser feeds the image-controlled passwd, group and User
// string to the resolver: it must not panic, and an accepted identity is
// always one the user namespace maps.
func FuzzResolveUser(f *testing.F) {
	f.Add("worker:extra", testPasswd, testGroup)
	f.Add("1000", testPasswd, testGroup)
	f.Add("", "", "")
	f.Add("a:b:c", "a:x:1:2:::\n", "b:x:3:\n")
	f.Add("x", "x:x:99999999999:0:::\n", "")
	f.Fuzz(func(t *testing.T, spec, passwd, group string) {
		u, err := resolveUser(spec, []byte(passwd), []byte(group))
		if err == nil && (u.uid > maxID || u.gid > maxID) {
			t.Fatalf("accepted %d:%d", u.uid, u.gid)
		}
		if err != nil && !errors.Is(err, ErrSpec) && !errors.Is(err, ErrNoSuchUser) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

func TestImageArgsEnvWorkDir(t *testing.T) {
	cfg := ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"--default"}, Env: []string{"A=image", "B=image", "bad", "PATH=/image/bin"}}
	for _, c := range []struct {
		command, want []string
		cfg           ImageConfig
	}{
		{nil, []string{"/entry", "--default"}, cfg},
		{[]string{"/job", "x"}, []string{"/job", "x"}, cfg},
		{nil, []string{"--default"}, ImageConfig{Cmd: []string{"--default"}}},
		{nil, []string{"/entry"}, ImageConfig{Entrypoint: []string{"/entry"}}},
	} {
		got, err := imageArgs(c.command, c.cfg)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("imageArgs(%v) = %v %v, want %v", c.command, got, err, c.want)
		}
	}
	if _, err := imageArgs(nil, ImageConfig{}); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "Entrypoint") {
		t.Errorf("no command anywhere: %v", err)
	}
	env := imageEnv(cfg, map[string]string{"B": "job"})
	if env["A"] != "image" || env["B"] != "job" || env["PATH"] != "/image/bin" || len(env) != 3 {
		t.Errorf("env %v", env)
	}
	if env := imageEnv(ImageConfig{}, nil); env["PATH"] != defaultPath {
		t.Errorf("default PATH: %v", env)
	}
	for in, want := range map[string]string{"": "/", "/opt/app/": "/opt/app"} {
		if got, err := imageWorkDir(ImageConfig{WorkingDir: in}); err != nil || got != want {
			t.Errorf("workdir %q: %q %v", in, got, err)
		}
	}
	if _, err := imageWorkDir(ImageConfig{WorkingDir: "rel"}); !errors.Is(err, ErrSpec) {
		t.Errorf("relative workdir: %v", err)
	}
	s := Spec{ID: "L", Dir: "/l", Output: Mount{Source: "/l/out", Target: "/out"}, Image: &ImageRoot{Layers: []string{"/layers/a"}}}
	if _, err := s.withDefaults(); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "neither Entrypoint nor Cmd") {
		t.Errorf("spec without any command: %v", err)
	}
	s.Image.Layers = nil
	s.Command = []string{"x"}
	if _, err := s.withDefaults(); !errors.Is(err, ErrSpec) {
		t.Errorf("image without layers: %v", err)
	}
}

func TestCheckSubIDs(t *testing.T) {
	file := "alice:100000:65536\ne31:200000:65536\nbob:300000:65536\n"
	for base, ok := range map[uint32]bool{100000: false, 165535: false, 165536: true, 200000: true, 234465: false, 400000: true} {
		err := checkSubIDs(strings.NewReader(file), "/etc/subuid", base, idRange)
		if ok != (err == nil) || err != nil && !errors.Is(err, ErrIDRange) {
			t.Errorf("base %d: %v", base, err)
		}
	}
}

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{"6.18.44-fc": true, "4.8.0": true, "4.7.10": false, "3.10.0-1160.el7": false, "": false, "5": false} {
		if got := kernelAtLeast(rel, 4, 8); got != want {
			t.Errorf("%q: %v", rel, got)
		}
	}
	p := seccompProfileFor("amd64", "4.4.0")
	allowsPtrace := func(p *specs.LinuxSeccomp) bool {
		return slices.ContainsFunc(p.Syscalls, func(s specs.LinuxSyscall) bool { return slices.Contains(s.Names, "ptrace") })
	}
	if allowsPtrace(p) || !allowsPtrace(seccompProfileFor("amd64", "4.8.0")) {
		t.Error("ptrace not tied to the kernel version")
	}
	for _, never := range []string{"mount", "umount2", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "unshare", "setns", "keyctl", "userfaultfd", "io_uring_setup", "open_by_handle_at", "pivot_root"} {
		if slices.ContainsFunc(p.Syscalls, func(s specs.LinuxSyscall) bool { return s.Action == specs.ActAllow && slices.Contains(s.Names, never) }) {
			t.Errorf("%s allowed", never)
		}
	}
}

// TestDriverFallback checks the spec edits of the fallback without a
// driver: stand-in device nodes, a fake `ldconfig -p`, fake libraries.
func TestDriverFallback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	dir := t.TempDir()
	dev, lib := filepath.Join(dir, "dev"), filepath.Join(dir, "lib")
	must(t, os.MkdirAll(dev, 0o755))
	must(t, os.MkdirAll(lib, 0o755))
	for name, minor := range map[string]int{"nvidia3": 3, "nvidiactl": 255, "nvidia-uvm": 0} {
		must(t, unix.Mknod(filepath.Join(dev, name), unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(minor)))))
	}
	must(t, os.WriteFile(filepath.Join(lib, "libcuda.so.550.54"), nil, 0o644))
	must(t, os.Symlink("libcuda.so.550.54", filepath.Join(lib, "libcuda.so.1")))
	must(t, os.WriteFile(filepath.Join(lib, "libnvidia-nvvm.so.4"), nil, 0o644))
	ldconfig := "4 libs found in cache `/etc/ld.so.cache'\n" +
		"\tlibcuda.so.1 (libc6,x86-64) => " + lib + "/libcuda.so.1\n" +
		"\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n" +
		"\tlibnvidia-nvvm.so.4 (libc6,x86-64) => " + lib + "/libnvidia-nvvm.so.4\n" +
		"\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"

	devs, err := gpuDevicesIn(dev, []GPU{{UUID: "GPU-x", Minor: 3}, {UUID: "GPU-sim", Simulated: true, Minor: -1}})
	must(t, err)
	var paths []string
	for _, d := range devs {
		paths = append(paths, d.Path)
	}
	if !slices.Equal(paths, []string{"/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm"}) || devs[0].Major != 195 || devs[0].Minor != 3 {
		t.Errorf("devices %+v", devs)
	}

	files := parseLdconfig([]byte(ldconfig), "amd64")
	if !slices.Equal(files, []string{lib + "/libcuda.so.1", lib + "/libnvidia-nvvm.so.4"}) {
		t.Errorf("ldconfig: %v", files)
	}
	g := &gpuInjector{ldconfig: func() ([]byte, error) { return []byte(ldconfig), nil }}
	mounts, dirs, err := g.driverMounts()
	must(t, err)
	if len(mounts) < 2 || mounts[0].Destination != lib+"/libcuda.so.1" || mounts[0].Source != lib+"/libcuda.so.550.54" || !slices.Contains(mounts[0].Options, "ro") {
		t.Errorf("mounts %+v", mounts)
	}
	if len(dirs) != 1 || dirs[0] != lib {
		t.Errorf("library dirs %v", dirs)
	}

	cfg := &specs.Spec{Process: &specs.Process{Env: []string{"LD_LIBRARY_PATH=/image/lib"}}, Linux: &specs.Linux{Devices: devs}}
	addLibraryPath(cfg, dirs)
	if v, _ := getEnv(cfg, "LD_LIBRARY_PATH"); v != "/image/lib:"+lib {
		t.Errorf("LD_LIBRARY_PATH %q", v)
	}
	devicesToBinds(cfg, map[string]string{"/dev/nvidiactl": dev + "/nvidiactl"})
	if len(cfg.Linux.Devices) != 0 || len(cfg.Mounts) != 3 || cfg.Mounts[1].Source != dev+"/nvidiactl" || cfg.Mounts[0].Source != "/dev/nvidia3" {
		t.Errorf("binds %+v", cfg.Mounts)
	}
}

// Python prints straight to the log unless the image or the job says
// otherwise.
func TestJobEnvPythonUnbuffered(t *testing.T) {
	for _, c := range []struct {
		name string
		spec Spec
		want string
	}{
		{"host root", Spec{}, "PYTHONUNBUFFERED=1"},
		{"image without it", Spec{Image: &ImageRoot{Config: ImageConfig{Env: []string{"A=1"}}}}, "PYTHONUNBUFFERED=1"},
		{"image sets it", Spec{Image: &ImageRoot{Config: ImageConfig{Env: []string{"PYTHONUNBUFFERED="}}}}, "PYTHONUNBUFFERED="},
		{"job sets it", Spec{Env: map[string]string{"PYTHONUNBUFFERED": "0"}}, "PYTHONUNBUFFERED=0"},
	} {
		env := jobEnv(c.spec)
		var got []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "PYTHONUNBUFFERED=") {
				got = append(got, kv)
			}
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %v, want %s", c.name, got, c.want)
		}
	}
}
