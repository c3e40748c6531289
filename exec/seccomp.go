package exec

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The sandbox's seccomp filter is an allow-list: a call it does not name
// fails with EPERM, so that a program probing for a feature degrades
// instead of dying.
//
// It is built from Docker's default profile as github.com/moby/profiles/seccomp
// v0.3.0 (2026-10-12) gives it in Go: the profile of Docker, containerd and
// podman for a container without capabilities, which years of ordinary
// programs have run under, since moby/profiles#20 with socket(2) allowed
// only for an allow-list of address families that leaves out AF_ALG
// (CVE-2026-31431, "Copy Fail") and AF_VSOCK (containerd#13327 ported it
// to containerd's default). Taking the rules from the module rather than
// keeping a list by hand keeps the two in step; TestSeccompTighterThanDocker
// proves every difference is a refusal of something Docker allows.
//
// It is tighter than that profile in these ways, each a call a batch job has
// no use for and an attacker does:
//
//   - socket(2) and socketpair(2) only for AF_UNIX, AF_INET, AF_INET6 and
//     AF_NETLINK (socketFamilies), where Docker allows some thirty
//     families and leaves socketpair unfiltered: no AF_ALG, AF_VSOCK,
//     AF_KEY, AF_PACKET, AF_XDP, AF_RDS, AF_TIPC, AF_CAN, AF_BLUETOOTH,
//     AF_KCM, ... each a kernel subsystem a job would reach only to
//     attack it.
//   - socketcall(2) refused: its arguments are behind a pointer, where a
//     filter cannot see the family, so allowing it (as v0.3.0 still does;
//     moby/moby#52494 refuses it in Docker's engine) would undo the
//     family filter on the ABIs that have it.
//   - The native ABI only: Docker adds the compat ABIs (x86 and x32 on
//     amd64, arm on arm64, s390 on s390x), whose calls arrive with other
//     numbers and, for the 32-bit ones, through socketcall. A call in an
//     ABI the filter does not list gets libseccomp's bad-architecture
//     action, which runc leaves at its default: the calling thread is
//     killed (SIGSYS, for a process of one thread). On amd64 socketcall
//     exists only in the i386 ABI, so there it is refused that way; where
//     the native ABI has it (s390x, ppc64le), with EPERM.
//   - No clock setting even in the form Docker allows without
//     CAP_SYS_TIME (adjtimex, clock_adjtime, clock_adjtime64), and no
//     name_to_handle_at, the other half of the 2014 "shocker" escape.
//
// Never allowed, as in Docker without capabilities: mount and the new
// mount API, umount2, pivot_root, chroot, unshare, setns, clone with
// namespace flags, module and kexec loading, bpf, perf_event_open,
// userfaultfd, io_uring, keyctl and the keyrings, reboot, swapon, acct,
// quotactl, open_by_handle_at and clock setting. clone3 answers ENOSYS so
// that libc falls back to clone, whose flags the filter can inspect.
// ptrace and process_vm_readv/writev are allowed on kernels since 4.8, as
// Docker allows them (before 4.8 a traced process could skip its filter):
// a debugger or profiler inside the job sees only the job. Names the
// runtime's libseccomp does not know are skipped by the runtime.

// socketFamilies are the address families a job may open sockets of:
// files and pipes between its own processes (AF_UNIX), TCP and UDP
// (AF_INET, AF_INET6: the loopback of its own network namespace, or a
// gang's private network, where NCCL and gloo talk), and AF_NETLINK, by
// which libc's getifaddrs and `ip` read the namespace's interfaces.
var socketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// refusedDefaults are calls Docker's default profile allows that the
// sandbox refuses (see above). socket and socketpair come back with the
// sandbox's own family filter (familyRules).
var refusedDefaults = []string{
	"adjtimex", "clock_adjtime", "clock_adjtime64", "name_to_handle_at",
	"socketcall", "socket", "socketpair",
}

// seccompArch is what the profile needs to know of an architecture: its
// seccomp token and its name in moby's rule filters (libseccomp's).
type seccompArch struct {
	arch   specs.Arch
	native string
}

// seccompArches maps Go's GOARCH to the architectures moby's profile
// knows. Where it lists none for one (ppc64le, or one missing here), the
// filter lists none and the runtime uses its native one alone.
var seccompArches = map[string]seccompArch{
	"386":      {specs.ArchX86, "x86"},
	"amd64":    {specs.ArchX86_64, "amd64"},
	"arm":      {specs.ArchARM, "arm"},
	"arm64":    {specs.ArchAARCH64, "arm64"},
	"loong64":  {specs.ArchLOONGARCH64, "loongarch64"},
	"mips64":   {specs.ArchMIPS64, "mips64"},
	"mips64le": {specs.ArchMIPSEL64, "mipsel64"},
	"ppc64le":  {specs.ArchPPC64LE, "ppc64le"},
	"riscv64":  {specs.ArchRISCV64, "riscv64"},
	"s390x":    {specs.ArchS390X, "s390x"},
}

// seccompProfile is the sandbox's filter for the architecture and kernel
// this binary runs on.
func seccompProfile() *specs.LinuxSeccomp {
	return seccompProfileFor(runtime.GOARCH, kernelRelease())
}

// seccompProfileFor is the sandbox's filter for goarch on a kernel of the
// given release: Docker's default made tighter (see above).
func seccompProfileFor(goarch, release string) *specs.LinuxSeccomp {
	p := dockerProfileFor(goarch, release)
	if len(p.Architectures) > 1 {
		p.Architectures = p.Architectures[:1] // the native ABI, without the compat ones
	}
	var rules []specs.LinuxSyscall
	for _, r := range p.Syscalls {
		r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return slices.Contains(refusedDefaults, n) })
		if len(r.Names) > 0 {
			rules = append(rules, r)
		}
	}
	p.Syscalls = append(rules, familyRules([]string{"socket", "socketpair"}, socketFamilies)...)
	return p
}

// dockerProfileFor is moby's default profile as Docker would give it to a
// container with no capabilities on goarch and a kernel of the given
// release: the rules that moby's own conversion (seccomp.GetDefaultProfile,
// which reads the host's architecture and kernel) keeps for it, and the
// architecture with its compat ABIs.
func dockerProfileFor(goarch, release string) *specs.LinuxSeccomp {
	d := mobyseccomp.DefaultProfile()
	a := seccompArches[goarch]
	p := d.LinuxSeccomp
	p.Architectures = nil
	for _, m := range d.ArchMap {
		if m.Arch == a.arch {
			p.Architectures = append([]specs.Arch{m.Arch}, m.SubArches...)
		}
	}
	applies := func(f *mobyseccomp.Filter) bool {
		// Every capability a rule names is missing: a job has none.
		return len(f.Caps) == 0 &&
			(len(f.Arches) == 0 || slices.Contains(f.Arches, a.native)) &&
			(f.MinKernel == nil || kernelAtLeast(release, int(f.MinKernel.Kernel), int(f.MinKernel.Major)))
	}
	excluded := func(f *mobyseccomp.Filter) bool {
		// A rule excluded for a capability stays: the job lacks it.
		return slices.Contains(f.Arches, a.native) ||
			f.MinKernel != nil && kernelAtLeast(release, int(f.MinKernel.Kernel), int(f.MinKernel.Major))
	}
	for _, r := range d.Syscalls {
		if r.Includes != nil && !applies(r.Includes) || r.Excludes != nil && excluded(r.Excludes) {
			continue
		}
		s := r.LinuxSyscall
		if r.Name != "" {
			s.Names = []string{r.Name}
		}
		p.Syscalls = append(p.Syscalls, s)
	}
	return &p
}

// familyRules allows the calls names for the address families given (as
// their first argument) and no other. Rules are one comparison each:
// runc turns several comparisons of one argument into alternatives, not a
// conjunction, so a bounded range cannot be written as two (moby's range
// rule, opencontainers/runc#2735). A run of families from AF_UNIX up is one
// "less than" (AF_UNSPEC below it creates nothing); every other family is
// an equality.
func familyRules(names []string, families []uint64) []specs.LinuxSyscall {
	fs := slices.Sorted(slices.Values(families))
	var rules []specs.LinuxSyscall
	rule := func(v uint64, op specs.LinuxSeccompOperator) {
		rules = append(rules, specs.LinuxSyscall{
			Names: slices.Clone(names), Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: v, Op: op}},
		})
	}
	rest := fs
	if len(fs) > 1 && fs[0] == unix.AF_UNIX && fs[1] == fs[0]+1 {
		end := 1
		for end < len(fs) && fs[end] == fs[end-1]+1 {
			end++
		}
		rule(fs[end-1]+1, specs.OpLessThan)
		rest = fs[end:]
	}
	for _, f := range rest {
		rule(f, specs.OpEqualTo)
	}
	return rules
}

// kernelRelease is uname -r, or "" if it cannot be read.
func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// kernelAtLeast reports whether a release string ("6.1.0-18-amd64") is at
// least major.minor; an unreadable one is not.
func kernelAtLeast(release string, major, minor int) bool {
	fields := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(fields) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(fields[0])
	mi, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
