// Package doctor checks a machine before it offers GPUs to an E31
// network: everything e31d needs to run jobs, each found ok, worth a
// warning, or failed, and for anything short of ok, how to fix it.
//
// The checks are pure functions of what a [Host] reports, so that each
// verdict is tested with a fake host; [Machine] is the real one, and it
// probes the way the daemon itself would: the OCI runtime must run a probe
// container through exec.NewRunner (being installed is not enough: crun
// 1.8 refuses hybrid cgroups), a user namespace with the sandbox's uid
// range must be made, an overlay must be mounted, and a job's disk (ext4 on
// a loop device, which bounds what a job writes) must be made.
//
// What counts as a failure is what stops a provider from running jobs at
// all (no working runtime, no memory cgroup, a full disk, a listen address
// that cannot be bound). What only narrows what it can run (no user
// namespaces or overlay, so no jobs in their own image; no job disks, so
// request.disk is not enforced; no GPUs; no CDI specs; swap not limited)
// is a warning. A machine without an NVIDIA
// driver is a warning, not a failure: it can still run the testnet with
// --sim-gpus and submit jobs.
//
// Under Windows' WSL the kernel is a light VM's and the GPU is
// paravirtualised (wsl.go): one check, only there, says what of it a GPU
// job lacks, read from files under a root that tests replace.
//
// Clock skew against peers is not measured: the daemon learns no peer's
// time, so the clock check asks the kernel whether NTP keeps the clock
// synchronised, which is what keeps receipts' times comparable.
package doctor
