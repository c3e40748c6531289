package doctor

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Windows runs Linux GPU jobs in WSL 2: a Linux kernel in a light VM whose
// GPU is paravirtualised. The Windows NVIDIA driver serves every GPU
// through one device, /dev/dxg, and mounts its Linux user-space libraries
// (libcuda, libnvidia-ml, nvidia-smi) at /usr/lib/wsl/lib; no Linux driver
// is installed, and there are no /dev/nvidia* nodes. WSL 1 has no GPU and
// no container support at all.

// wslLibDir is where WSL 2 mounts the Windows driver's Linux libraries.
const wslLibDir = "/usr/lib/wsl/lib"

// WSL is what the checks learn of a WSL kernel; the zero value is a
// machine that is not WSL.
type WSL struct {
	// Release is the kernel's release (/proc/sys/kernel/osrelease) where
	// it is a WSL kernel, else "".
	Release string
	// Version is 1 or 2.
	Version int
	// DXG: /dev/dxg, the paravirtual GPU, exists.
	DXG bool
	// NVML: libnvidia-ml.so.1 is in /usr/lib/wsl/lib.
	NVML bool
	// LoaderPath: /usr/lib/wsl/lib is in the dynamic loader's
	// configuration (/etc/ld.so.conf and /etc/ld.so.conf.d), so that a
	// daemon started by systemd, with no LD_LIBRARY_PATH, finds NVML.
	LoaderPath bool
	// Systemd: systemd runs (/run/systemd/system), or /etc/wsl.conf
	// turns it on for the distribution's next start.
	Systemd, SystemdConfigured bool
}

// WSL looks at the real machine.
func (Machine) WSL() WSL { return probeWSL("/") }

// probeWSL reads the files that say whether the kernel is WSL's, under
// root (a fake root in tests).
func probeWSL(root string) WSL {
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(root, p))
		return strings.TrimSpace(string(b))
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, p))
		return err == nil
	}
	release := read("proc/sys/kernel/osrelease")
	version := wslVersion(release)
	if version == 0 {
		// Custom WSL kernels may name themselves otherwise; /proc/version
		// still says who built them.
		version = wslVersion(read("proc/version"))
	}
	if version == 0 {
		return WSL{}
	}
	w := WSL{Release: release, Version: version}
	w.DXG = exists("dev/dxg")
	w.NVML = exists(filepath.Join(wslLibDir, "libnvidia-ml.so.1"))
	w.LoaderPath = loaderHas(root, wslLibDir)
	w.Systemd = exists("run/systemd/system")
	w.SystemdConfigured = wslConfSystemd(read("etc/wsl.conf"))
	return w
}

// wslVersion reads a kernel's release or version string: 2 for WSL 2's
// kernels ("5.15.153.1-microsoft-standard-WSL2"), 1 for WSL 1's
// ("4.4.0-19041-Microsoft"), 0 for any other.
func wslVersion(s string) int {
	switch {
	case strings.Contains(s, "WSL2"), strings.Contains(s, "microsoft"):
		return 2
	case strings.Contains(s, "Microsoft"):
		return 1
	}
	return 0
}

// loaderHas reports whether dir is named in the dynamic loader's
// configuration under root.
func loaderHas(root, dir string) bool {
	files := []string{filepath.Join(root, "etc/ld.so.conf")}
	more, _ := filepath.Glob(filepath.Join(root, "etc/ld.so.conf.d/*.conf"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			line, _, _ = strings.Cut(line, "#")
			if strings.TrimRight(strings.TrimSpace(line), "/") == dir {
				return true
			}
		}
	}
	return false
}

// wslConfSystemd reports whether /etc/wsl.conf's [boot] section sets
// systemd=true.
func wslConfSystemd(conf string) bool {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader([]byte(conf)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.ToLower(strings.TrimSpace(line[1 : len(line)-1]))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && section == "boot" && strings.EqualFold(strings.TrimSpace(k), "systemd") {
			v, _, _ = strings.Cut(v, "#")
			return strings.EqualFold(strings.TrimSpace(v), "true")
		}
	}
	return false
}

// checkWSL says, on a WSL kernel, what a contributor on Windows is missing;
// on any other machine it is the zero Result, no check.
func checkWSL(h Host, o Options) Result {
	w := h.WSL()
	if w.Version == 0 {
		return Result{}
	}
	if w.Version == 1 {
		return result("wsl", Fail, "convert the distribution to WSL 2 in PowerShell: wsl --set-version <distribution> 2",
			"WSL 1 (kernel %s): it has no GPU and cannot run containers", w.Release)
	}
	var missing, fixes []string
	status := OK
	worse := func(s Status) {
		if s == Fail || status == OK {
			status = s
		}
	}
	if !w.DXG || !w.NVML {
		worse(Fail)
		what := "no /dev/dxg"
		if w.DXG {
			what = "no libnvidia-ml.so.1 in " + wslLibDir
		}
		missing = append(missing, what+": the Windows NVIDIA driver does not reach WSL, so the node offers no GPU")
		fixes = append(fixes, "install the current NVIDIA driver on Windows (never a Linux driver inside WSL), then run wsl --update and wsl --shutdown in PowerShell")
	}
	if w.NVML && !w.LoaderPath {
		worse(Warn)
		missing = append(missing, wslLibDir+" is not on the loader path, so e31d started by systemd finds no NVML")
		fixes = append(fixes, "echo "+wslLibDir+" > /etc/ld.so.conf.d/ld.wsl.conf && ldconfig")
	}
	if !w.Systemd {
		worse(Warn)
		what := "systemd does not run, so the e31d unit cannot"
		fix := "add [boot] systemd=true to /etc/wsl.conf, then run wsl --shutdown in PowerShell and open the distribution again"
		if w.SystemdConfigured {
			what = "systemd is turned on in /etc/wsl.conf but does not run yet"
			fix = "run wsl --shutdown in PowerShell and open the distribution again"
		}
		missing = append(missing, what)
		fixes = append(fixes, fix)
	}
	if w.DXG && !wslCDIGPUs(h, o) {
		worse(Warn)
		missing = append(missing, "no CDI spec names each GPU, and WSL has no /dev/nvidia* nodes: leased GPUs may not enter the sandbox")
		fixes = append(fixes, "generate a spec (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml) and prove it with e31d doctor --gpu-job")
	}
	detail := "WSL 2 (kernel " + w.Release + "): "
	if len(missing) == 0 {
		detail += "/dev/dxg, NVML from " + wslLibDir + " on the loader path, systemd running"
	} else {
		detail += strings.Join(missing, "; ")
	}
	// What no setting changes, said once where it applies.
	detail += "; on WSL every GPU is one device, /dev/dxg, so a job leased one GPU of several may reach the others, and --reclaim-on-use cannot see Windows programs (use --hours or e31 drain)"
	return result("wsl", status, strings.Join(fixes, "; "), "%s", detail)
}

// wslCDIGPUs reports whether a CDI spec names the GPUs one by one, which
// is how e31d gives a lease its GPUs where no /dev/nvidia* nodes exist.
func wslCDIGPUs(h Host, o Options) bool {
	specs, err := h.CDISpecs(o.CDISpecDirs)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(specs.Devices, func(d string) bool {
		id, ok := strings.CutPrefix(d, "nvidia.com/gpu=")
		return ok && id != "all"
	})
}
