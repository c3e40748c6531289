// Package exec describes a provider's GPUs and runs leased batch jobs in a
// sandbox, on the host's system directories or on the job's own image.
//
// # GPUs to offer
//
// [GPU] describes one GPU a provider can lease. Real ones are found by the
// subpackage exec/nvidia (NVML through cgo, kept out of this package so
// that programs that only run sandboxes compile no NVML code).
// [ParseSimSpec] describes simulated GPUs ("4xH100:80GiB") for test networks;
// their UUIDs are derived from the node's peer ID so that they are stable
// across restarts and distinct across nodes. A simulated GPU gets no device
// node, only the environment variables a real one would get.
//
// # The sandbox
//
// [Runner.Run] turns a [Spec] into an OCI bundle (in RunnerOptions.BundleRoot,
// else under the lease directory) and runs it with runc (or crun) as
// `runc run --keep`. The runtime is found
// and proved by [NewRunner], which runs one tiny container before accepting
// it: runc and crun differ in which cgroup layouts they accept (crun 1.8
// refuses the v1/v2 hybrid that many hosts still use), and a failure at
// start-up is cheaper than a failed lease.
//
// What a job without an image sees:
//
//   - A root filesystem that is an empty directory of the bundle, mounted
//     read-only, holding read-only bind mounts of the host's /usr and of
//     those of /bin, /sbin, /lib, /lib32, /lib64, /libx32 that are real
//     directories. Where they are symlinks (the usr-merge: /bin -> usr/bin)
//     the symlink is recreated instead, so that /bin and /usr/bin are the
//     same tree inside as outside. Binds are not recursive: runc 1.1 makes
//     only the top of a recursive bind read-only, which would leave any
//     submount writable.
//   - A minimal /etc. Generated: passwd and group (root, the job's own user
//     "job" and nobody, so the host's account names do not leak), hosts
//     (localhost only) and nsswitch.conf ("files" only, so no NSS module
//     tries to reach a host daemon). Bound read-only from the host when
//     present: ld.so.cache (the driver's libraries may live outside the
//     default search path), alternatives (Debian's /usr/bin links point
//     through it), ssl/certs (public CA certificates) and localtime
//     (recreated when a symlink).
//     Nothing else of /etc: never shadow, gshadow, ssh, ssl/private,
//     machine-id or sudoers.
//   - /proc, /dev (a tmpfs with the standard devices and the leased GPUs'
//     nodes), /dev/pts, /dev/shm, /dev/mqueue, /sys and /sys/fs/cgroup
//     read-only, and a private tmpfs /tmp. The /proc paths runc's default
//     spec masks or makes read-only are masked or read-only here too, plus
//     /sys/devices/virtual/powercap (energy counters leak what other
//     tenants compute), /proc/diskstats (every disk's traffic: what the
//     host and other tenants do, and when), DMI (/sys/class/dmi,
//     /sys/devices/virtual/dmi, and /sys/firmware with /sys/firmware/dmi
//     in it: the machine's make and serial numbers) and the driver's /proc
//     entries of GPUs the job does not hold (hostview.go).
//   - Inputs bound read-only; the output and checkpoint directories bound
//     read-write and named in E31_OUTPUT and E31_CHECKPOINT. The working
//     directory is the output directory. PYTHONUNBUFFERED=1 unless the
//     image or the job sets it: stdout is a file, and a script's prints
//     held in Python's buffer would be lost with a job killed at its limit.
//   - New pid, mount, ipc, uts and network namespaces (plus cgroup on a
//     pure cgroup v2 host). The network namespace has only loopback, so
//     127.0.0.1 is the job's own, not the host's, and nothing else routes.
//   - cgroup limits under /e31/<container id>: memory (memory+swap set to
//     the same value where swap is accounted, so a job cannot spill into
//     swap), CPU quota (CPUs × period), pids (default 1024), a device
//     allow-list (runc's defaults plus the leased GPUs), and block I/O: a
//     weight of half the default share where the host's I/O scheduler
//     weighs cgroups, and a bandwidth and IOPS limit on the job's own disk
//     (RunnerOptions.DiskBandwidth, DiskIOPS), so that its direct I/O
//     cannot take the host disk from the daemon's synced writes.
//
// Without an image the job runs as a host uid of its own (gid the same),
// claimed for its run from a range of 65536 after the image jobs'
// ([DefaultJobUIDBase]) and named "job" inside (jobuid.go), with every
// capability set empty and no_new_privs, not as root without
// capabilities. Root without capabilities would already be held by the
// read-only mounts, but the kernel still treats uid 0 specially in places
// (files owned by root on the writable mounts, /proc entries checked by
// uid, past escapes such as CVE-2019-5736 that needed uid 0 inside), and
// an unprivileged uid costs only a chown of the output and checkpoint
// directories, which the runner does before each run. A uid of its own,
// not one shared by every job (nobody, as it once was), because the kernel
// keeps limits and rights per uid: two tenants as one uid share
// RLIMIT_NPROC's count, inotify's and pipes' per-user limits, and may
// signal each other's processes. RLIMIT_NPROC is still not set: the pids
// cgroup limits each job. RLIMIT_NOFILE is 65536 (data loaders open many
// files), or the daemon's own hard limit where that is lower, and
// RLIMIT_CORE is 0 (a core dump would fill the output).
//
// # Jobs in their own image
//
// A [Spec] with an [ImageRoot] runs on the job's own OCI image instead of
// the host's system directories. The layers are unpacked directories in
// overlay format, top first (the layer cache's business); the runner
// mounts them on the host, before the runtime starts, as one overlay. A
// job with a [Disk] gets an upper layer on it, so that it may write its
// root as `docker run` lets it, within its quota, and the writes go with
// the disk; a job without one gets no upper layer, and the kernel itself
// refuses every write to its root (overlay.go explains the skeleton layer
// under them and where the mount lives). The
// mount is removed by Cleanup, and after a crash by Sweep, before the
// bundle that holds the skeleton is deleted; the rootfs directory itself
// is only ever removed with rmdir, so nothing is deleted through a mount
// that is still there.
//
//   - The command follows `docker run`: a Spec.Command replaces the
//     image's Entrypoint and Cmd; without one, Entrypoint then Cmd run,
//     and an image with neither is an [ErrSpec]. The environment is the
//     image's Env with Spec.Env over it (PATH from the image when it sets
//     one), then the runner's own variables. The working directory is
//     Spec.WorkDir, else the image's WorkingDir, else /.
//   - The user is the image's User ("uid", "uid:gid", "name",
//     "name:group"), resolved through the image's own /etc/passwd and
//     /etc/group, read from the mounted root through [os.Root] so that a
//     symlink cannot lead to the host's files; default 0:0. Supplementary
//     groups are those that list the user by name. HOME is the user's
//     home from passwd (/root for uid 0), made a private tmpfs owned by
//     the user when the image has that directory; else HOME is /tmp.
//   - The job runs in a user namespace: container ids 0..65535 are host
//     ids UIDBase..UIDBase+65535 ([DefaultUIDBase], 100000). Root inside
//     is an unprivileged uid outside, so a host file that only root may
//     read stays unreadable, and the image's files, owned by UIDBase plus
//     their owner, mean to the job what the image says. The range must be
//     the daemon's alone: image jobs are refused ([Runner.ImageSupport],
//     [ErrIDRange]) when /etc/subuid or /etc/subgid gives any part of it
//     to anyone but "e31";
//     reserve it, with the range of jobs without an image after it, with
//     "e31:100000:131072" in both files, and give the layer cache the same
//     base. The output and checkpoint directories are
//     handed to UIDBase plus the job's uid and gid (recursively, with
//     lchown, so that a resumed job can rewrite its last checkpoint);
//     what the job writes comes back owned by that uid, readable by the
//     daemon, which is root.
//   - /tmp and HOME are tmpfs, the output and checkpoint mounts writable,
//     inputs read-only, the root writable on the job's disk (read-only
//     without one): nothing written outside the output and checkpoint
//     survives the job.
//   - Everything else is as without an image: namespaces, cgroup limits,
//     empty capability sets, no_new_privs, masked /proc paths, seccomp.
//
// # GPUs
//
// Leased GPUs enter a sandbox through CDI when a spec in the CDI spec
// directories ([DefaultCDISpecDirs], re-read before each run with real
// GPUs) names every leased GPU, as nvidia.com/gpu=<UUID> or =<index>:
// exactly those devices are injected, with whatever else the spec adds
// (control devices, libraries, environment, hooks). Otherwise the driver
// fallback applies: /dev/nvidia<minor>, nvidiactl and nvidia-uvm(-tools)
// with cgroup device rules, and for an image job the driver's user-space
// libraries found through `ldconfig -p` (libcuda, libnvidia-ml,
// libnvidia-ptxjitcompiler, libnvidia-nvvm) and nvidia-smi, bound
// read-only at their host paths, with their directories appended to
// LD_LIBRARY_PATH: they must match the host's kernel module, so they never
// come from the image. In a user namespace the runtime cannot create
// device nodes, so the runner binds the host's nodes instead (from the
// host path a CDI spec names). Simulated GPUs get only
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES, always the leased
// UUIDs. [Runner.GPUInjection] says which method applies, for the log.
// CDI hooks that write into the root (NVIDIA's update-ldcache and
// create-symlinks) cannot do so on an image root without an upper layer
// (a job without a disk); the library path stands in for the first on
// every image root.
//
// # System calls
//
// A seccomp allow-list (seccomp.go): the default profile of Docker,
// containerd and podman for a container without capabilities, taken from
// github.com/moby/profiles/seccomp, made tighter: socket(2) and
// socketpair(2) for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only (no
// AF_ALG, whose AEAD interface is CVE-2026-31431, no AF_VSOCK, AF_KEY,
// AF_PACKET, ...), no socketcall(2), which would hide the family, the
// native ABI only (a call in a compat ABI, x86 or x32 on amd64, kills the
// calling thread), and no clock adjusting or name_to_handle_at.
// Everything else fails with EPERM, so a program that probes for a feature
// degrades instead of dying: mount, umount2 and the new mount API,
// unshare, setns, clone with namespace flags, module and kexec loading,
// bpf, perf_event_open, userfaultfd, io_uring, keyrings,
// open_by_handle_at, reboot, swap, acct, quotactl. clone3 answers ENOSYS
// so that libc falls back to clone, whose flags a filter can inspect.
// ptrace and process_vm_* are allowed on kernels since 4.8, as Docker
// allows them.
//
// # Secrets
//
// A [Spec] with Secrets gives the job each as the variable NAME (unless the
// value holds a NUL) and as the file /run/secrets/NAME ([SecretsDir]),
// mode 0400 and owned by the job's user (the image's user, through the
// user namespace), in a folder of mode 0500, bound read-only, nosuid,
// nodev and noexec. The values must never reach a disk, and the bundle
// holds them twice: the files, and config.json, which names the
// variables. So a run with secrets has its bundle on a tmpfs of its own,
// mounted before anything is written there and sized for what it holds,
// whatever the bundle root is; Cleanup (and Sweep, after a crash)
// unmounts it, the secrets with it, before the bundle is removed. Nothing
// of the job may be mounted at or above /run/secrets, so neither the
// output nor a checkpoint holds them.
//
// # Disk quota
//
// A job's writes are bounded by a filesystem of its own ([MountDisk]): a
// sparse file in the lease directory, formatted ext4 and loop-mounted on
// the host, whose free space for non-root users is exactly the quota. A
// [Spec] with a [Disk] must have its output and checkpoint directories on
// it, and gets /tmp (and an image job's HOME) there too, bound instead of
// a tmpfs, and an image job's root gets its upper layer there; a root
// without a disk has no upper layer, so nothing else is writable.
// A job that fills it gets ENOSPC, never the host's disk: the daemon's
// store and other jobs' disks are other filesystems. A job that then fails
// is marked [Result].DiskFull, with the quota in its reason. /dev/shm stays
// a tmpfs, bounded by the memory cgroup.
//
// Why a loop-mounted file, not the alternatives: project quotas need the
// provider's store to be XFS or ext4 mounted with prjquota, which a
// daemon cannot count on; a tmpfs of the quota's size is charged to the
// job's memory, so a 10GiB disk would need 10GiB of RAM. The file costs
// the host only the blocks written (the formatter writes a few hundred
// KiB: no journal, lazy inode tables, no discard), the slack the
// formatter leaves above the quota is taken by a preallocated file whose
// extents are never written, and DiskReserve more is kept for root alone,
// so that the daemon can still lay the job's logs beside a full output.
// A provider does not run the formatter for every job: [DiskMaker] keeps
// one formatted image per disk size and copies the blocks it holds (a few
// hundred KiB) into each new disk's sparse file, in the kernel
// (copy_file_range). Measured here (go test ./exec -run '^$' -bench
// MountDisk, 10GiB): a make-and-remove costs 5.1-5.4 ms of CPU and 7.8-8.3
// ms of wall time with mkfs.ext4 for each disk, 2.8 ms and 5.3 ms from the
// template. No pool of mounted disks is kept: it would pin loop devices
// and inodes while idle. The loop device does direct I/O to its file, so
// what a job writes is cached once, not twice. The disk is made before
// staging. Unmounting frees the loop device (autoclear); [RemoveDisk]
// never deletes through a mount, and [SweepDisks] removes, after a crash
// or reboot, every disk left.
//
// # Run directory
//
// The runtime's state and the bundles live no longer than the containers,
// and are written and deleted for every run, so a daemon keeps them on a
// tmpfs: [RunDir] gives it /run/e31/<digest of its data directory>, and
// mounts a tmpfs at /run/e31 where /run is not one, once for the machine.
// On a disk each run cost its filesystem's journal a dozen creations and
// as many deletions. Measured with `go run ./testnet bench --only
// throughput --profile DIR` (200 trivial jobs on 10 daemons, 2 cores, one
// virtual disk), two runs each: runc's CPU per job went from 1.19-1.20x a
// bare run's to 1.15-1.17x, and e31d's own sandbox work from 8.0-9.5 ms to
// 7.4-8.0 ms. The job's logs, output and disk stay in the lease
// directory, on the daemon's disk.
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
// install a handler (shells: trap). The grace is cut short once no process
// of the job catches SIGTERM or holds it blocked (read from /proc while the
// grace runs, stop.go): `python3 train.py` without a handler, run as the
// command, would otherwise hold its GPUs for the whole grace and end the
// same way. Outcomes: exit 0 is completed; any
// other exit is failed and the job's doing, with reason "oom" when the
// memory cgroup recorded an OOM kill; the limit is limit; a cancelled
// context is stopped. A command that cannot be executed is the job's
// failure (exit code 127); so is a Spec.WorkDir that cannot be made (in a
// read-only input, or where the job's own folder holds a file; exit code
// -1, the reason naming it). A failure before the job starts that is the
// provider's doing (a spec the runner refuses, [ErrSpec]; a missing input
// or GPU device; the runtime failing, [ErrRuntime]) is returned as an
// error. The runtime's own error, if any, also ends up in stderr.log, since
// the runtime and the job share that stream.
//
// Whatever happens, Run deletes the container, the bundle and any cgroup
// left behind before it returns. The run is `--keep` so that the job's
// memory cgroup, with its OOM counter, outlives the job; a container that
// ended by itself is then deleted without a second runtime process (its
// cgroups and its state directory are all a delete removes), unless its
// spec has poststop hooks or a cgroup is still busy, when the runtime's
// own `delete` does it. After a daemon restart, [Runner.Sweep]
// removes containers whose lease is no longer live.
package exec
