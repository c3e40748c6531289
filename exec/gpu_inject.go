package exec

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// DefaultCDISpecDirs are where CDI specs are looked for: static ones
// (nvidia-ctk cdi generate) and generated at boot (nvidia-cdi-refresh).
var DefaultCDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// cdiGPUKind is the CDI kind NVIDIA's specs name GPUs under.
const cdiGPUKind = "nvidia.com/gpu"

// driverLibraries are the prefixes of the sonames of the host driver's
// user-space libraries a CUDA program needs in its image. They must come
// from the host: they must match the loaded kernel module.
var driverLibraries = []string{"libcuda.so.", "libnvidia-ml.so.", "libnvidia-ptxjitcompiler.so.", "libnvidia-nvvm.so."}

// driverBinaries are host driver programs mounted into an image.
var driverBinaries = []string{"nvidia-smi"}

// gpuInjector decides how leased GPUs enter a sandbox: through a CDI spec
// naming them, or else through the driver's device nodes (and, for an
// image, its libraries). Its fields are set once by newGPUInjector; the
// cache has its own lock.
type gpuInjector struct {
	dirs  []string
	cache *cdi.Cache
	// driverFiles are the host driver's libraries and binaries, found
	// once (`ldconfig -p` is slow) on first use.
	driverOnce  sync.Once
	driverFiles []string
	driverErr   error
	// ldconfig returns `ldconfig -p` output; replaced in tests.
	ldconfig func() ([]byte, error)
}

func newGPUInjector(dirs []string) (*gpuInjector, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI: %w", err)
	}
	return &gpuInjector{dirs: dirs, cache: cache, ldconfig: hostLdconfig}, nil
}

// describe says which method the injector uses on this host.
func (g *gpuInjector) describe() string {
	specs := 0
	for _, v := range g.cache.ListVendors() {
		specs += len(g.cache.GetVendorSpecs(v))
	}
	if slices.ContainsFunc(g.cache.ListDevices(), func(d string) bool { return strings.HasPrefix(d, cdiGPUKind+"=") }) {
		return fmt.Sprintf("cdi (%d specs in %s)", specs, strings.Join(g.dirs, ", "))
	}
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		return "driver device nodes and libraries (no CDI spec names a GPU in " + strings.Join(g.dirs, ", ") + ")"
	}
	return "none (no NVIDIA driver; simulated GPUs get the environment only)"
}

// cdiNames returns the CDI device names of the leased real GPUs, by UUID
// or else by index as the specs name them, or nil when some GPU is not
// named by any spec: then every GPU takes the driver fallback, since
// mixing the two would inject the control devices twice. Specs are
// re-read first, so that one written after the daemon started (at boot,
// by nvidia-cdi-refresh) counts.
func (g *gpuInjector) cdiNames(gpus []GPU) []string {
	var real []GPU
	for _, gpu := range gpus {
		if !gpu.Simulated {
			real = append(real, gpu)
		}
	}
	if len(real) == 0 {
		return nil
	}
	// Errors are per spec file; the devices of the good ones still count.
	_ = g.cache.Refresh()
	var names []string
	for _, gpu := range real {
		name := ""
		for _, id := range []string{gpu.UUID, strconv.Itoa(gpu.Index)} {
			if n := cdiGPUKind + "=" + id; g.cache.GetDevice(n) != nil {
				name = n
				break
			}
		}
		if name == "" {
			return nil
		}
		names = append(names, name)
	}
	return names
}

// injectCDI applies the named devices' edits to cfg and returns the host
// path of every device node they add, by its path inside the sandbox (a
// spec may name a host node at another path).
func (g *gpuInjector) injectCDI(cfg *specs.Spec, names []string) (map[string]string, error) {
	if _, err := g.cache.InjectDevices(cfg, names...); err != nil {
		return nil, fmt.Errorf("CDI: %w", err)
	}
	hostPaths := map[string]string{}
	note := func(nodes []*cdispec.DeviceNode) {
		for _, n := range nodes {
			if n.HostPath != "" {
				hostPaths[n.Path] = n.HostPath
			}
		}
	}
	for _, name := range names {
		d := g.cache.GetDevice(name)
		note(d.ContainerEdits.DeviceNodes)
		if s := d.GetSpec(); s != nil && s.Spec != nil {
			note(s.ContainerEdits.DeviceNodes)
		}
	}
	return hostPaths, nil
}

// driverMounts are the read-only bind mounts of the host driver's
// libraries and programs into an image root, at their host paths (as
// libnvidia-container does), and the directories to add to the loader's
// path, since the image's ld.so.cache does not know them.
func (g *gpuInjector) driverMounts() ([]specs.Mount, []string, error) {
	g.driverOnce.Do(func() {
		out, err := g.ldconfig()
		if err != nil {
			g.driverErr = fmt.Errorf("GPU driver libraries: %w", err)
			return
		}
		g.driverFiles = parseLdconfig(out, runtime.GOARCH)
		for _, b := range driverBinaries {
			if p, err := exec.LookPath(b); err == nil {
				g.driverFiles = append(g.driverFiles, p)
			}
		}
	})
	if g.driverErr != nil {
		return nil, nil, g.driverErr
	}
	mounts, dirs := driverMountsFor(g.driverFiles)
	return mounts, dirs, nil
}

// driverMountsFor turns the host's driver files into bind mounts. Each
// file is bound from its resolved target (the soname is a symlink to the
// versioned file) to its own path.
func driverMountsFor(files []string) ([]specs.Mount, []string) {
	var mounts []specs.Mount
	var dirs []string
	for _, f := range files {
		src, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue
		}
		// The canonical directory: on a usr-merged host ldconfig says
		// /lib/..., and in a usr-merged image /lib is a symlink, through
		// which no mount point can be prepared.
		dir, err := filepath.EvalSymlinks(filepath.Dir(f))
		if err != nil {
			continue
		}
		dest := filepath.Join(dir, filepath.Base(f))
		mounts = append(mounts, specs.Mount{Destination: dest, Type: "bind", Source: src, Options: []string{"bind", "ro", "nosuid", "nodev"}})
		if strings.Contains(filepath.Base(f), ".so") && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return mounts, dirs
}

// parseLdconfig picks the driver's libraries for goarch out of
// `ldconfig -p` output, whose lines read
// "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1".
func parseLdconfig(out []byte, goarch string) []string {
	abi := map[string]string{"amd64": "x86-64", "arm64": "AArch64", "ppc64le": "64bit"}[goarch]
	var files []string
	for line := range strings.SplitSeq(string(out), "\n") {
		lhs, target, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if !ok || !filepath.IsAbs(target) {
			continue
		}
		name, flags, _ := strings.Cut(lhs, " ")
		if !slices.ContainsFunc(driverLibraries, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		if abi != "" && !strings.Contains(flags, abi) {
			continue
		}
		if !slices.Contains(files, target) {
			files = append(files, target)
		}
	}
	return files
}

func hostLdconfig() ([]byte, error) {
	for _, p := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		if _, err := os.Stat(p); err == nil {
			var stderr bytes.Buffer
			cmd := exec.Command(p, "-p")
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("%s -p: %w: %s", p, err, stderr.String())
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("ldconfig not found")
}

// devicesToBinds replaces cfg's device nodes by bind mounts of the host's
// nodes (at hostPaths[path], else the same path). In a user namespace the
// runtime cannot create device nodes; runc would bind the host node at the
// same path itself, which is wrong where a CDI spec names a host node at
// another path. The cgroup device rules stay: they still apply.
func devicesToBinds(cfg *specs.Spec, hostPaths map[string]string) {
	for _, d := range cfg.Linux.Devices {
		src := d.Path
		if h, ok := hostPaths[d.Path]; ok {
			src = h
		}
		cfg.Mounts = append(cfg.Mounts, specs.Mount{Destination: d.Path, Type: "bind", Source: src, Options: []string{"bind", "rw", "nosuid", "noexec"}})
	}
	cfg.Linux.Devices = nil
}
