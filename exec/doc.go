// Package exec finds a provider's GPUs and runs leased batch jobs in a
// sandbox.
//
// # GPUs
//
// [Discover] asks NVML (through go-nvml, loaded with dlopen at run time) for
// the machine's GPUs. A machine without the NVIDIA driver is an ordinary
// case, not an error: Discover reports zero GPUs and logs one line saying
// why. Binaries built without cgo cannot load NVML and always report zero.
// [ParseSimSpec] describes simulated GPUs ("4xH100:80GiB") for test networks;
// their UUIDs are derived from the node's peer ID so that they are stable
// across restarts and distinct across nodes. A simulated GPU gets no device
// node, only the environment variables a real one would get.
//
// # The sandbox
//
// [Runner.Run] turns a [Spec] into an OCI bundle under the lease directory
// and runs it with runc (or crun) as `runc run --keep`. The runtime is found
// and proved by [NewRunner], which runs one tiny container before accepting
// it: runc and crun differ in which cgroup layouts they accept (crun 1.8
// refuses the v1/v2 hybrid that many hosts still use), and a failure at
// start-up is cheaper than a failed lease.
//
// What the job sees:
//
//   - A root filesystem that is an empty directory of the bundle, mounted
//     read-only, holding read-only bind mounts of the host's /usr and of
//     those of /bin, /sbin, /lib, /lib32, /lib64, /libx32 that are real
//     directories. Where they are symlinks (the usr-merge: /bin -> usr/bin)
//     the symlink is recreated instead, so that /bin and /usr/bin are the
//     same tree inside as outside. Binds are not recursive: runc 1.1 makes
//     only the top of a recursive bind read-only, which would leave any
//     submount writable.
//   - A minimal /etc. Generated: passwd and group (root and nobody only, so
//     the host's account names do not leak), hosts (localhost only) and
//     nsswitch.conf ("files" only, so no NSS module tries to reach a host
//     daemon). Bound read-only from the host when present: ld.so.cache (the
//     driver's libraries may live outside the default search path),
//     alternatives (Debian's /usr/bin links point through it), ssl/certs
//     (public CA certificates) and localtime (recreated when a symlink).
//     Nothing else of /etc: never shadow, gshadow, ssh, ssl/private,
//     machine-id or sudoers.
//   - /proc, /dev (a tmpfs with the standard devices and the leased GPUs'
//     nodes), /dev/pts, /dev/shm, /dev/mqueue, /sys and /sys/fs/cgroup
//     read-only, and a private tmpfs /tmp. The /proc paths runc's default
//     spec masks or makes read-only are masked or read-only here too, plus
//     /sys/devices/virtual/powercap (energy counters leak what other
//     tenants compute).
//   - Inputs bound read-only; the output and checkpoint directories bound
//     read-write and named in E31_OUTPUT and E31_CHECKPOINT. The working
//     directory is the output directory.
//   - New pid, mount, ipc, uts and network namespaces (plus cgroup on a
//     pure cgroup v2 host). The network namespace has only loopback, so
//     127.0.0.1 is the job's own, not the host's, and nothing else routes.
//   - cgroup limits under /e31/<container id>: memory (memory+swap set to
//     the same value where swap is accounted, so a job cannot spill into
//     swap), CPU quota (CPUs × period), pids (default 1024), and a device
//     allow-list (runc's defaults plus the leased GPUs).
//
// The job runs as nobody (uid and gid 65534) with every capability set
// empty and no_new_privs, not as root without capabilities. Root without
// capabilities would already be held by the read-only mounts, but the
// kernel still treats uid 0 specially in places (files owned by root on
// the writable mounts, /proc entries checked by uid, past escapes such as
// CVE-2019-5736 that needed uid 0 inside), and an unprivileged uid costs
// only a chown of the output and checkpoint directories, which the runner
// does before each run. RLIMIT_NPROC is deliberately not set: it counts
// every process of uid 65534 on the host, across leases; the pids cgroup
// limits each job instead. RLIMIT_NOFILE is 65536 (data loaders open many
// files), or the daemon's own hard limit where that is lower, and
// RLIMIT_CORE is 0 (a core dump would fill the output).
//
// A seccomp filter allows everything except calls that reach kernel
// surface a batch job has no use for and that container escapes have used:
// keyrings (keyctl, add_key, request_key), bpf, perf_event_open, userfaultfd,
// io_uring, fanotify, mount and the new mount API, pivot_root, chroot,
// unshare, setns,
// creating user namespaces through clone, ptrace and process_vm_*, module
// and kexec loading, open_by_handle_at, clock and time setting, swap,
// reboot, acct and quotactl. clone3 answers ENOSYS so that libc falls back
// to clone, whose flags a filter can inspect. These fail with EPERM rather
// than killing the job, so a program that probes for a feature degrades.
//
// # Running
//
// The job's stdout and stderr go to stdout.log and stderr.log in the lease
// directory, each keeping its last LogCap bytes: the file grows to twice
// the cap, then its tail is moved to the front, and on exit it is cut to
// exactly the cap. The tail, because that is where the error is.
//
// At the time limit, or when Run's context is cancelled, every process of
// the job gets SIGTERM, then SIGKILL after the grace period. A job's main
// process is pid 1 of its namespace and the kernel drops signals that pid 1
// does not handle, so a job that wants to checkpoint on SIGTERM must
// install a handler (shells: trap). Outcomes: exit 0 is completed; any
// other exit is failed and the job's doing, with reason "oom" when the
// memory cgroup recorded an OOM kill; the limit is limit; a cancelled
// context is stopped. A command that cannot be executed is the job's
// failure (exit code 127). A failure before the job starts that is the
// provider's doing (a spec the runner refuses, [ErrSpec]; a missing input
// or GPU device; the runtime failing, [ErrRuntime]) is returned as an
// error. The runtime's own error, if any, also ends up in stderr.log, since
// the runtime and the job share that stream.
//
// Whatever happens, Run deletes the container, the bundle and any cgroup
// left behind before it returns. After a daemon restart, [Runner.Sweep]
// removes containers whose lease is no longer live.
package exec
