package doctor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CVE-2026-31431 ("Copy Fail") lets any local user who can open an AF_ALG
// socket of the AEAD kind (the algif_aead module) and splice(2) into it
// write four bytes at a time into the page cache of any file they can
// read, read-only mounts and setuid binaries included: root for any user
// of the machine. Jobs cannot reach it whatever the kernel: the sandbox's
// seccomp filter refuses socket(2) for AF_ALG, and every family but the
// four a job needs (exec/seccomp.go). The check is for the machine's other
// users, and for what a job that escaped its sandbox some other way could
// add to it.
//
// The kernel ranges it uses: the bug came with commit 72548b093ee3
// ("crypto: algif_aead - copy AAD from src to dst") in Linux 4.14 and was
// fixed by a664bf3d603d ("crypto: algif_aead - Revert to operating
// out-of-place"), in 7.0 and in the stable releases 6.19.12, 6.18.22 and
// 6.12.85. So: before 4.14, not affected; 6.12.85+, 6.18.22+, 6.19.12+
// and 7.0+, fixed; 6.12, 6.18 and 6.19 below those and every 6.13-6.17,
// affected; 4.14 to 6.11 otherwise (the series 5.4, 5.10, 5.15, 6.1 and
// 6.6 that distributions carry), fixed only where the distribution
// backported the fix into a release whose number does not say so, and so
// "possibly affected".

// AEADState is how the kernel offers algif_aead.
type AEADState string

const (
	AEADLoaded   AEADState = "loaded"    // in /proc/modules
	AEADBuiltIn  AEADState = "built in"  // in modules.builtin, or =y in the kernel's config
	AEADLoadable AEADState = "loadable"  // its module file is installed and nothing stops modprobe
	AEADBlocked  AEADState = "blocked"   // installed, but a modprobe.d line stops it loading
	AEADAbsent   AEADState = "absent"    // neither built in nor installed
	AEADUnknown  AEADState = "not known" // nothing here says
)

// KernelAEAD is what the machine's kernel offers of the AEAD interface of
// AF_ALG.
type KernelAEAD struct {
	// Release is uname -r.
	Release string
	State   AEADState
	// Source is what told: a file, or a modprobe.d line and its file.
	Source string
}

// copyFailExposure says whether a kernel release is in the range of
// CVE-2026-31431 (see above): "no", "yes" or "maybe" (a distribution
// series whose number cannot tell).
func copyFailExposure(release string) string {
	major, minor, patch, ok := kernelVersion(release)
	// fixedFrom: a series whose stable releases have the fix from patch on.
	fixedFrom := func(fixed int) string {
		if patch >= fixed {
			return "no"
		}
		return "yes"
	}
	switch {
	case !ok:
		return "maybe"
	case major < 4 || major == 4 && minor < 14 || major >= 7:
		return "no"
	case major == 6 && minor == 19:
		return fixedFrom(12)
	case major == 6 && minor == 18:
		return fixedFrom(22)
	case major == 6 && minor >= 13:
		return "yes" // series that ended before the fix
	case major == 6 && minor == 12:
		return fixedFrom(85)
	default:
		return "maybe"
	}
}

// kernelVersion reads major.minor.patch from a release such as
// "6.12.85-1-amd64" or "5.15.0-179-generic"; a missing patch is 0.
func kernelVersion(release string) (major, minor, patch int, ok bool) {
	num := func(s string) (int, string) {
		end := 0
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(s[:end])
		if err != nil {
			return -1, s
		}
		return n, s[end:]
	}
	major, rest := num(release)
	if major < 0 || !strings.HasPrefix(rest, ".") {
		return 0, 0, 0, false
	}
	minor, rest = num(rest[1:])
	if minor < 0 {
		return 0, 0, 0, false
	}
	if after, ok := strings.CutPrefix(rest, "."); ok {
		patch, _ = num(after)
		patch = max(patch, 0)
	}
	return major, minor, patch, true
}

func checkCopyFail(h Host) Result {
	k := h.KernelAEAD()
	const blocked = "; jobs cannot reach it either way: the sandbox's seccomp filter refuses AF_ALG sockets"
	exposure := copyFailExposure(k.Release)
	if exposure == "no" {
		return result("copy fail", OK, "", "kernel %s is outside the releases CVE-2026-31431 affects (4.14 until 6.12.85, 6.18.22, 6.19.12 and 7.0)", k.Release)
	}
	where := ""
	if k.Source != "" {
		where = " (" + k.Source + ")"
	}
	switch k.State {
	case AEADAbsent, AEADBlocked:
		return result("copy fail", OK, "", "kernel %s may have CVE-2026-31431, but its algif_aead is %s%s%s", k.Release, k.State, where, blocked)
	}
	what := "is affected by"
	if exposure == "maybe" {
		what = "may be affected by (a distribution's release in the range, fixed only where it backported the fix)"
	}
	fix := "update the kernel (to 6.12.85, 6.18.22, 6.19.12, 7.0 or later, or your distribution's release with the fix for CVE-2026-31431), " +
		"or stop the module loading: echo 'install algif_aead /bin/false' > /etc/modprobe.d/disable-algif-aead.conf, then rmmod algif_aead"
	if k.State == AEADBuiltIn {
		fix = "update the kernel (to 6.12.85, 6.18.22, 6.19.12, 7.0 or later, or your distribution's release with the fix for CVE-2026-31431), " +
			"or boot with initcall_blacklist=algif_aead_init: it is built in, so modprobe.d cannot stop it"
	}
	return result("copy fail", Warn, fix,
		"kernel %s %s CVE-2026-31431 (\"Copy Fail\": AF_ALG AEAD and splice write into the page cache of any readable file, a local user's way to root), and its algif_aead is %s%s%s",
		k.Release, what, k.State, where, blocked)
}

// KernelAEAD reads how this machine's kernel offers algif_aead.
func (Machine) KernelAEAD() KernelAEAD {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return KernelAEAD{State: AEADUnknown}
	}
	return inspectAEAD("/", unix.ByteSliceToString(u.Release[:]))
}

// modprobeDirs are where modprobe reads its configuration, in its order.
var modprobeDirs = []string{"etc/modprobe.d", "run/modprobe.d", "usr/local/lib/modprobe.d", "usr/lib/modprobe.d", "lib/modprobe.d"}

// inspectAEAD reads, under root (the machine's /, or a tree made for a
// test), how a kernel of release offers algif_aead: loaded, built in,
// stopped by modprobe's configuration, installed, or not there.
func inspectAEAD(root, release string) KernelAEAD {
	k := KernelAEAD{Release: release}
	at := func(p string) string { return filepath.Join(root, p) }
	if b, err := os.ReadFile(at("proc/modules")); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, _, _ := strings.Cut(line, " "); name == "algif_aead" {
				k.State, k.Source = AEADLoaded, "/proc/modules"
				return k
			}
		}
	}
	modules := at(filepath.Join("lib/modules", release))
	if b, err := os.ReadFile(filepath.Join(modules, "modules.builtin")); err == nil && bytes.Contains(b, []byte("/algif_aead.ko")) {
		k.State, k.Source = AEADBuiltIn, "/lib/modules/"+release+"/modules.builtin"
		return k
	}
	if _, err := os.Stat(modules); err == nil {
		installed := false
		if b, err := os.ReadFile(filepath.Join(modules, "modules.dep")); err == nil {
			installed = bytes.Contains(b, []byte("/algif_aead.ko"))
		}
		if m, _ := filepath.Glob(filepath.Join(modules, "kernel", "crypto", "algif_aead.ko*")); len(m) > 0 {
			installed = true
		}
		if !installed {
			k.State, k.Source = AEADAbsent, "/lib/modules/"+release
			return k
		}
		if line, file := modprobeBlock(root); line != "" {
			k.State, k.Source = AEADBlocked, file+": "+line
			return k
		}
		k.State, k.Source = AEADLoadable, "/lib/modules/"+release
		return k
	}
	// No modules for this kernel (one built without module support, or
	// whose modules are elsewhere): its configuration says.
	for _, cfg := range []string{"proc/config.gz", "boot/config-" + release} {
		v, ok := kernelConfig(at(cfg), "CONFIG_CRYPTO_USER_API_AEAD")
		if !ok {
			continue
		}
		k.Source = "/" + cfg
		switch v {
		case "y":
			k.State = AEADBuiltIn
		case "m":
			k.State = AEADUnknown
		default:
			k.State = AEADAbsent
		}
		return k
	}
	k.State = AEADUnknown
	return k
}

// modprobeBlock finds a line of modprobe's configuration under root that
// stops algif_aead loading: "install algif_aead" with a command that does
// nothing, or "blacklist algif_aead" (which stops the kernel's own request
// for it by its alias, the only way an unprivileged user can ask). It
// returns the line and its file.
func modprobeBlock(root string) (line, file string) {
	var files []string
	for _, d := range modprobeDirs {
		m, _ := filepath.Glob(filepath.Join(root, d, "*.conf"))
		files = append(files, m...)
	}
	files = append(files, filepath.Join(root, "etc/modprobe.conf"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for l := range strings.Lines(string(b)) {
			fields := strings.Fields(l)
			if len(fields) < 2 || fields[1] != "algif_aead" {
				continue
			}
			switch {
			case fields[0] == "blacklist",
				fields[0] == "install" && len(fields) >= 3 && (filepath.Base(fields[2]) == "false" || filepath.Base(fields[2]) == "true"):
				rel, _ := filepath.Rel(root, f)
				return strings.Join(fields, " "), "/" + rel
			}
		}
	}
	return "", ""
}

// kernelConfig reads option's value ("y", "m", or "" when not set) from a
// kernel configuration, gzipped or not; ok is false when there is none.
func kernelConfig(name, option string) (string, bool) {
	f, err := os.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return "", false
		}
		defer z.Close()
		r = z
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), option+"="); ok {
			return v, true
		}
	}
	return "", sc.Err() == nil
}
