package exec

import (
	"runtime"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The sandbox's seccomp filter is an allow-list: a call not named here
// fails with EPERM. The list is the default profile of Docker, containerd
// and podman (moby profiles/seccomp/default.json) for a container with no
// capabilities, which years of ordinary programs have been run under, less
// a few calls that profile allows but a batch job has no use for: setting
// clocks (adjtimex, clock_adjtime), name_to_handle_at (the other half of
// the 2014 "shocker" escape), and the io_uring calls that Docker has since
// dropped. Never allowed: mount and the new mount API, umount2,
// pivot_root, chroot, unshare, setns, module and kexec loading, bpf,
// perf_event_open, userfaultfd, keyctl and the keyrings, reboot, swapon,
// acct, quotactl, open_by_handle_at and clock setting. ptrace and
// process_vm_readv/writev are allowed, as Docker allows them on kernels
// since 4.8 (before 4.8 a traced process could skip its filter): a
// debugger or profiler inside the job sees only the job. Names the
// runtime's libseccomp does not know are skipped by the runtime.
var allowedSyscalls = []string{
	"accept", "accept4", "access", "alarm", "bind", "brk", "cachestat", "capget", "capset",
	"chdir", "chmod", "chown", "chown32", "clock_getres", "clock_getres_time64",
	"clock_gettime", "clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64",
	"close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit",
	"exit_group", "faccessat", "faccessat2", "fadvise64", "fadvise64_64", "fallocate",
	"fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchown32",
	"fchownat", "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
	"fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64",
	"fsync", "ftruncate", "ftruncate64", "futex", "futex_requeue", "futex_time64", "futex_wait",
	"futex_waitv", "futex_wake", "futimesat", "getcpu", "getcwd", "getdents", "getdents64",
	"getegid", "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups",
	"getgroups32", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid",
	"getpriority", "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32",
	"getrlimit", "get_robust_list", "getrusage", "getsid", "getsockname", "getsockopt",
	"get_thread_area", "gettid", "gettimeofday", "getuid", "getuid32", "getxattr",
	"inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
	"ioctl", "io_destroy", "io_getevents", "io_pgetevents", "io_pgetevents_time64",
	"ioprio_get", "ioprio_set", "io_setup", "io_submit", "ipc", "kill",
	"landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown",
	"lchown32", "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr", "_llseek",
	"lremovexattr", "lseek", "lsetxattr", "lstat", "lstat64", "madvise", "map_shadow_stack",
	"membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod",
	"mknodat", "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mq_getsetattr",
	"mq_notify", "mq_open", "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend",
	"mq_timedsend_time64", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd",
	"msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "_newselect",
	"open", "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl",
	"pread64", "preadv", "preadv2", "prlimit64", "process_mrelease", "pselect6",
	"pselect6_time64", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
	"readlinkat", "readv", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg",
	"remap_file_pages", "removexattr", "rename", "renameat", "renameat2", "restart_syscall",
	"rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigtimedwait_time64",
	"rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr", "sched_getparam",
	"sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
	"sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity",
	"sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp",
	"select", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "send",
	"sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsgid32",
	"setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32", "setitimer",
	"setpgid", "setpriority", "setregid", "setregid32", "setresgid", "setresgid32",
	"setresuid", "setresuid32", "setreuid", "setreuid32", "setrlimit", "set_robust_list",
	"setsid", "setsockopt", "set_thread_area", "set_tid_address", "setuid", "setuid32",
	"setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
	"signalfd4", "sigprocmask", "sigreturn", "socket", "socketcall", "socketpair", "splice",
	"stat", "stat64", "statfs", "statfs64", "statx", "symlink", "symlinkat", "sync",
	"sync_file_range", "sync_file_range2", "syncfs", "sysinfo", "tee", "tgkill", "time",
	"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
	"timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime",
	"timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times", "tkill", "truncate",
	"truncate64", "ugetrlimit", "umask", "uname", "unlink", "unlinkat", "utime", "utimensat",
	"utimensat_time64", "utimes", "vfork", "vmsplice", "wait4", "waitid", "waitpid", "write",
	"writev",
	// Architecture-specific calls of the same profile.
	"arch_prctl", "modify_ldt", "arm_fadvise64_64", "arm_sync_file_range", "breakpoint",
	"cacheflush", "set_tls", "riscv_flush_icache", "s390_pci_mmio_read", "s390_pci_mmio_write",
	"s390_runtime_instr",
}

// ptraceSyscalls are allowed on kernels since 4.8 only.
var ptraceSyscalls = []string{"ptrace", "process_vm_readv", "process_vm_writev"}

// namespaceFlags are clone's flags that create namespaces: a job may
// clone threads and processes, never namespaces.
const namespaceFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC |
	syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | 0x02000000 /* CLONE_NEWCGROUP */

// personalities are the personality(2) values the default profile
// allows: Linux, with or without UNAME26 and ADDR_NO_RANDOMIZE, and the
// query 0xffffffff.
var personalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// seccompProfile is the sandbox's filter for the architecture this binary
// runs on, with that architecture's compat ABIs: a 32-bit syscall on a
// 64-bit kernel would otherwise bypass a filter written for 64-bit numbers.
func seccompProfile() *specs.LinuxSeccomp {
	return seccompProfileFor(runtime.GOARCH, kernelAtLeast(kernelRelease(), 4, 8))
}

func seccompProfileFor(goarch string, ptraceSafe bool) *specs.LinuxSeccomp {
	eperm := uint(syscall.EPERM)
	enosys := uint(syscall.ENOSYS)
	allowed := allowedSyscalls
	if ptraceSafe {
		allowed = append(append([]string{}, allowed...), ptraceSyscalls...)
	}
	rules := []specs.LinuxSyscall{
		{Names: allowed, Action: specs.ActAllow},
		// clone3 passes its flags in memory, where a filter cannot look;
		// ENOSYS makes libc fall back to clone.
		{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		{
			Names:  []string{"clone"},
			Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{
				Index: cloneFlagsArg(goarch), Value: namespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual,
			}},
		},
	}
	for _, p := range personalities {
		rules = append(rules, specs.LinuxSyscall{
			Names: []string{"personality"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: p, Op: specs.OpEqualTo}},
		})
	}
	return &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   seccompArches(goarch),
		Syscalls:        rules,
	}
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
