package exec

import (
	"runtime"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// deniedSyscalls fail with EPERM inside the sandbox. The filter allows by
// default: a batch job may use anything an ordinary unprivileged program
// uses, and a list of what to allow would break jobs in ways hard to
// foresee. Denied are the calls that reach kernel surface no batch job
// needs and that escapes and privilege bugs have come through. Most need a
// capability the job lacks anyway; denying them here means a kernel bug in
// the capability check is not enough. Names the runtime's libseccomp does
// not know are skipped by the runtime.
var deniedSyscalls = []string{
	// Kernel keyrings are not namespaced.
	"keyctl", "add_key", "request_key",
	// eBPF and perf have a long record of local privilege escalations.
	"bpf", "perf_event_open",
	// userfaultfd and io_uring turn kernel races into reliable exploits.
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// Mounts and namespaces: the sandbox's layout is fixed.
	"mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"unshare", "setns",
	// Looking into or writing other processes' memory.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	// Kernel code and the machine itself.
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"iopl", "ioperm", "syslog", "lookup_dcookie",
	// File handles bypass the mount namespace (the 2014 "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
	// Clocks are shared with the host.
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
	"fanotify_init",
}

// seccompProfile is the sandbox's filter for the architecture this binary
// runs on, with that architecture's compat ABIs: a 32-bit syscall on a
// 64-bit kernel would otherwise bypass a filter written for 64-bit numbers.
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(syscall.EPERM)
	enosys := uint(syscall.ENOSYS)
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArches(runtime.GOARCH),
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			// clone3 passes its flags in memory, where a filter cannot
			// look; ENOSYS makes libc fall back to clone.
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
			// clone with CLONE_NEWUSER would create a user namespace, in
			// which the job holds every capability over new namespaces.
			{
				Names:    []string{"clone"},
				Action:   specs.ActErrno,
				ErrnoRet: &eperm,
				Args: []specs.LinuxSeccompArg{{
					Index: cloneFlagsArg(runtime.GOARCH), Value: syscall.CLONE_NEWUSER,
					ValueTwo: syscall.CLONE_NEWUSER, Op: specs.OpMaskedEqual,
				}},
			},
		},
	}
}

func seccompArches(goarch string) []specs.Arch {
	switch goarch {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X, specs.ArchS390}
	case "riscv64":
		return []specs.Arch{specs.ArchRISCV64}
	default:
		return nil // the runtime's native architecture only
	}
}

// cloneFlagsArg is the index of clone's flags argument, which s390
// swaps with the stack pointer.
func cloneFlagsArg(goarch string) uint {
	if goarch == "s390x" {
		return 1
	}
	return 0
}
