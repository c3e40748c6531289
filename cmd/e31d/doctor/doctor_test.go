package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/nvidia"
)

// fakeHost is a healthy GPU machine; each test breaks one thing.
type fakeHost struct {
	root       bool
	runtime    RuntimeInfo
	runtimeErr error
	cgroups    exec.Cgroups
	cgroupsErr error
	usernsMax  int
	usernsErr  error
	overlayErr error
	jobDiskErr error
	driver     nvidia.Driver
	driverErr  error
	cdi        CDISpecs
	disk       Disk
	diskErr    error
	dataMode   fs.FileMode
	dataErr    error
	bindErr    map[string]error
	running    []string
	synced     bool
	syncKnown  bool
	aead       KernelAEAD
	wsl        WSL
}

func healthy() *fakeHost {
	return &fakeHost{
		root:      true,
		runtime:   RuntimeInfo{Path: "/usr/sbin/runc", Version: "runc version 1.1.5", GPUInjection: "cdi (1 specs in /etc/cdi)"},
		cgroups:   exec.Cgroups{V2: true, Controllers: []string{"cpu", "io", "memory", "pids"}, SwapLimit: true},
		usernsMax: 15000,
		driver:    nvidia.Driver{Version: "550.54.15", CUDA: "12.4", GPUs: []exec.GPU{{Index: 0, Model: "NVIDIA H200", MemoryBytes: 141 << 30}}},
		cdi:       CDISpecs{Files: []string{"/etc/cdi/nvidia.yaml"}, Devices: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=all"}},
		disk:      Disk{Mount: "/var/lib", Free: 500 << 30, Size: 1 << 40},
		dataMode:  0o700,
		synced:    true, syncKnown: true,
		aead: KernelAEAD{Release: "6.12.85-1-amd64", State: AEADLoadable},
	}
}

func (f *fakeHost) Root() bool { return f.root }
func (f *fakeHost) Runtime(context.Context, string) (RuntimeInfo, error) {
	return f.runtime, f.runtimeErr
}
func (f *fakeHost) Cgroups() (exec.Cgroups, error)              { return f.cgroups, f.cgroupsErr }
func (f *fakeHost) UserNamespaces(context.Context) (int, error) { return f.usernsMax, f.usernsErr }
func (f *fakeHost) Overlay(context.Context) error               { return f.overlayErr }
func (f *fakeHost) JobDisk(context.Context) error               { return f.jobDiskErr }
func (f *fakeHost) GPUs(context.Context) (nvidia.Driver, error) { return f.driver, f.driverErr }
func (f *fakeHost) CDISpecs([]string) (CDISpecs, error)         { return f.cdi, nil }
func (f *fakeHost) Disk(string) (Disk, error)                   { return f.disk, f.diskErr }
func (f *fakeHost) Bind(addr string) error                      { return f.bindErr[addr] }
func (f *fakeHost) DataDirMode(string) (fs.FileMode, error)     { return f.dataMode, f.dataErr }
func (f *fakeHost) RunningDaemon(string) []string               { return f.running }
func (f *fakeHost) ClockSynced() (bool, bool)                   { return f.synced, f.syncKnown }
func (f *fakeHost) KernelAEAD() KernelAEAD                      { return f.aead }
func (f *fakeHost) WSL() WSL                                    { return f.wsl }

var opts = Options{DataDir: "/var/lib/e31", ImageCacheBytes: 64 << 30, Listen: []string{"/ip4/0.0.0.0/tcp/4031", "/ip4/0.0.0.0/udp/4031/quic-v1"}}

func find(t *testing.T, r Report, name string) Result {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r)
	return Result{}
}

func TestHealthyMachinePasses(t *testing.T) {
	r := Run(context.Background(), healthy(), opts)
	if len(r.Checks) != 13 {
		t.Errorf("%d checks, want 13", len(r.Checks))
	}
	for _, c := range r.Checks {
		if c.Status != OK || c.Fix != "" {
			t.Errorf("%s: %s %q fix %q, want ok without a fix", c.Name, c.Status, c.Detail, c.Fix)
		}
	}
}

func TestEachProblem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*fakeHost, *Options)
		check  string
		want   Status
		detail string // a fragment the detail must hold
		fix    string // a fragment the fix must hold
	}{
		{"not root", func(f *fakeHost, _ *Options) { f.root = false }, "root", Warn, "not running as root", "sudo"},
		{"no runtime", func(f *fakeHost, _ *Options) {
			f.runtimeErr = fmt.Errorf("%w: runc or crun not found", exec.ErrNoRuntime)
		}, "runtime", Fail, "not found", "apt-get install -y runc"},
		{"runtime fails its probe", func(f *fakeHost, _ *Options) {
			f.runtimeErr = errors.New("probe: cgroups in hybrid mode not supported")
		}, "runtime", Fail, "hybrid", "--runtime"},
		{"uid range taken", func(f *fakeHost, _ *Options) {
			f.runtime.Images = fmt.Errorf("%w: %w: /etc/subuid gives it to alice", exec.ErrNoImages, exec.ErrIDRange)
		}, "runtime", Warn, "own image: no", "e31:100000:131072"},
		{"job uids taken", func(f *fakeHost, _ *Options) {
			f.runtime.JobUIDs = fmt.Errorf("%w: /etc/subuid gives 165536-231071 to bob", exec.ErrIDRange)
		}, "runtime", Warn, "another's too", "e31:100000:131072"},
		{"kernel with copy fail", func(f *fakeHost, _ *Options) {
			f.aead = KernelAEAD{Release: "6.12.80-1-amd64", State: AEADLoaded, Source: "/proc/modules"}
		}, "copy fail", Warn, "is affected by CVE-2026-31431", "install algif_aead /bin/false"},
		{"no memory cgroup", func(f *fakeHost, _ *Options) {
			f.cgroupsErr = errors.New("cgroups: no memory controller mounted")
		}, "cgroups", Fail, "no memory controller", "memory controller"},
		{"no pids controller", func(f *fakeHost, _ *Options) {
			f.cgroups.Controllers = []string{"cpu", "memory"}
		}, "cgroups", Warn, "missing pids", "subtree_control"},
		{"v1 without devices", func(f *fakeHost, _ *Options) {
			f.cgroups = exec.Cgroups{Hybrid: true, Controllers: []string{"cpu", "memory", "pids"}, SwapLimit: true}
		}, "cgroups", Warn, "missing devices", "mount them"},
		{"swap not accounted", func(f *fakeHost, _ *Options) { f.cgroups.SwapLimit = false }, "cgroups", Warn, "swap", "swapaccount=1"},
		{"userns off", func(f *fakeHost, _ *Options) { f.usernsMax = 0 }, "userns", Warn, "= 0", "max_user_namespaces"},
		{"userns refused", func(f *fakeHost, _ *Options) { f.usernsErr = errors.New("operation not permitted") }, "userns", Warn, "not permitted", "unprivileged_userns_clone"},
		{"no overlay", func(f *fakeHost, _ *Options) { f.overlayErr = errors.New("no such device") }, "overlay", Warn, "no such device", "modprobe overlay"},
		{"no job disks", func(f *fakeHost, _ *Options) { f.jobDiskErr = errors.New("mkfs.ext4 not found") }, "job disks", Fail, "takes no job", "--unbounded-disk"},
		{"no job disks, unbounded", func(f *fakeHost, o *Options) {
			f.jobDiskErr, o.UnboundedDisk = errors.New("mkfs.ext4 not found"), true
		}, "job disks", Warn, "not bounded", "e2fsprogs"},
		{"no driver", func(f *fakeHost, _ *Options) {
			f.driverErr = fmt.Errorf("%w: libnvidia-ml.so.1 not found", nvidia.ErrNoDriver)
			f.cdi = CDISpecs{}
		}, "gpus", Warn, "no GPUs: ", "install the NVIDIA driver"},
		{"driver without GPUs", func(f *fakeHost, _ *Options) { f.driver.GPUs = nil }, "gpus", Warn, "reports none", "nvidia-smi"},
		{"GPUs without CDI", func(f *fakeHost, _ *Options) { f.cdi = CDISpecs{} }, "cdi", Warn, "device nodes", "nvidia-ctk cdi generate"},
		{"CDI without GPUs named", func(f *fakeHost, _ *Options) {
			f.cdi.Devices = []string{"vendor.com/fpga=0"}
		}, "cdi", Warn, "none named nvidia.com/gpu", "nvidia-ctk"},
		{"broken CDI spec", func(f *fakeHost, _ *Options) {
			f.cdi.Errors = []string{"/etc/cdi/nvidia.yaml: invalid device name"}
		}, "cdi", Warn, "invalid device name", "regenerate"},
		{"disk full", func(f *fakeHost, _ *Options) { f.disk.Free = 100 << 20 }, "disk", Fail, "100.0 MiB free", "--data"},
		{"disk under the reserve", func(f *fakeHost, _ *Options) { f.disk.Free = 50 << 30 }, "disk", Fail, "under the 102.4 GiB e31d keeps in reserve", "--disk-reserve"},
		{"disk below the layer cache", func(f *fakeHost, o *Options) { f.disk.Free, o.DiskReserve = 10<<30, 5<<30 }, "disk", Warn, "less than the layer cache", "--image-cache-size"},
		{"data dir read-only", func(f *fakeHost, _ *Options) {
			f.disk.Free, f.disk.NotWritable = 1<<20, errors.New("/var/lib is on a read-only filesystem")
		}, "disk", Fail, "cannot be written: /var/lib is on a read-only filesystem", "read-write"},
		{"data dir unusable", func(f *fakeHost, _ *Options) { f.diskErr = errors.New("/var/lib/e31 is not a directory") }, "disk", Fail, "not a directory", "--data"},
		{"data dir open to others", func(f *fakeHost, _ *Options) { f.dataMode = 0o755 }, "data dir", Warn, "is 0755", "chmod 700 /var/lib/e31"},
		{"data dir open to its group", func(f *fakeHost, _ *Options) { f.dataMode = 0o750 }, "data dir", Warn, "API's token", "every start"},
		{"data dir not made yet", func(f *fakeHost, _ *Options) { f.dataErr = fs.ErrNotExist }, "data dir", OK, "makes it 0700", ""},
		{"port taken", func(f *fakeHost, _ *Options) {
			f.bindErr = map[string]error{opts.Listen[0]: errors.New("address already in use")}
		}, "listen", Fail, "already in use", "another --listen"},
		{"clock not synchronised", func(f *fakeHost, _ *Options) { f.synced = false }, "clock", Warn, "not synchronised", "set-ntp"},
		{"clock unknown", func(f *fakeHost, _ *Options) { f.syncKnown = false }, "clock", Warn, "cannot tell", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, o := healthy(), opts
			tc.break_(h, &o)
			r := Run(context.Background(), h, o)
			c := find(t, r, tc.check)
			if c.Status != tc.want || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("%s = %s %q fix %q; want %s with %q, fix with %q", tc.check, c.Status, c.Detail, c.Fix, tc.want, tc.detail, tc.fix)
			}
			if tc.want != OK && c.Fix == "" && tc.fix != "" {
				t.Errorf("%s: no fix given", tc.check)
			}
			// Every other check stays as it was on the healthy machine,
			// but for the CDI check, which depends on the GPUs found.
			for _, other := range r.Checks {
				if other.Name != tc.check && other.Status != OK && !(tc.check == "gpus" && other.Name == "cdi") {
					t.Errorf("%s also turned %s: %s", other.Name, other.Status, other.Detail)
				}
			}
		})
	}
}

func TestNoDriverNeedsNoCDI(t *testing.T) {
	h := healthy()
	h.driverErr, h.cdi = fmt.Errorf("%w: driver not loaded", nvidia.ErrNoDriver), CDISpecs{}
	if c := find(t, Run(context.Background(), h, opts), "cdi"); c.Status != OK {
		t.Errorf("cdi = %s %q; without GPUs no spec is needed", c.Status, c.Detail)
	}
}

func TestPortHeldByTheRunningDaemon(t *testing.T) {
	h := healthy()
	h.bindErr = map[string]error{opts.Listen[0]: errors.New("address already in use")}
	h.running = []string{"/ip4/192.168.1.5/tcp/4031/p2p/12D3KooWabc", "/ip4/192.168.1.5/udp/4031/quic-v1/p2p/12D3KooWabc"}
	c := find(t, Run(context.Background(), h, opts), "listen")
	if c.Status != OK || !strings.Contains(c.Detail, "held by the e31d running") {
		t.Errorf("listen = %s %q; a port the running daemon holds is fine", c.Status, c.Detail)
	}
	h.running = []string{"/ip4/192.168.1.5/tcp/4032/p2p/12D3KooWabc"}
	if c := find(t, Run(context.Background(), h, opts), "listen"); c.Status != Fail {
		t.Errorf("listen = %s %q; the daemon holds another port, so this one is someone else's", c.Status, c.Detail)
	}
}

func TestReportOutput(t *testing.T) {
	h := healthy()
	h.diskErr = errors.New("permission denied")
	h.synced = false
	r := Run(context.Background(), h, opts)
	if r.Count(Fail) != 1 || r.Count(Warn) != 1 || r.Count(OK) != 11 {
		t.Fatalf("counts ok %d warn %d fail %d", r.Count(OK), r.Count(Warn), r.Count(Fail))
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"fail  disk", "fix: create the data dir", "warn  clock", "11 ok, 1 warnings, 1 failed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Checks) != 13 || back.Checks[0].Name != "root" {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
	if !strings.Contains(string(b), `"status":"fail"`) {
		t.Errorf("JSON lacks the failed status: %s", b)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1 << 20: "1.0 MiB", 64 << 30: "64.0 GiB", 3 << 39: "1.5 TiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
