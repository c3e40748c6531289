// Package provider is the provider's side of a lease: it proposes the
// leases Match assigns this node, holds the GPUs, stages the inputs, runs
// the job in its sandbox, imports and hands over the output, signs receipts
// while compute is held, releases, and settles what an absent submitter
// left open; after a restart it ends and settles the leases it had.
//
// Each job writes on a disk of its own of request.disk (exec.MountDisk),
// mounted in the lease folder before staging, so that a resumed run's
// checkpoint is laid out on it; the output, the checkpoints and the job's
// /tmp live there, and the result is gathered there too, so that moving
// the output into it stays a rename. A job that fills it ends failed, the
// job's doing, "wrote more than request.disk N". The disk goes before the
// lease folder does (cleanup), and after a crash Resume sweeps every disk
// left, mounted or not. A job's disk is granted out of the data dir's
// free space when its lease is proposed (Deps.Room, room.go): a job whose
// disk, output and inputs the disk has no room for beside its reserve and
// the other jobs' grants is not proposed for, and the offer says the
// largest disk this node can grant now, so Match does not assign it
// there. Under pressure on the disk, what settled leases keep only for
// retention goes early (retention.go). A provider started with
// --cpu-jobs=false proposes no job that asks for no GPU (Config.NoCPUJobs).
//
// Before each run the provider asks the driver again which GPUs it has
// (Deps.SeeGPUs) and keeps the leased ones as it found them; the final
// receipt, which both sides sign, carries them (ledger.GPUSeen), so what
// the job ran on is provable from the record.
//
// Each signed lease is carried through its life by a leaseRunner of its
// own (runner.go), as nomad's task runner carries a task: the runner owns
// the lease's record, its locks and its persistence, and goes through one
// phase a file: staging (stage.go: the job's disk, the inputs, the image,
// the checkpoint to resume from), the run (runjob.go, with its checkpoints
// in checkpoint.go), the output (output.go: import and hand-over), release
// (release.go: the meter stops, the GPUs go back, the lease's folder goes)
// and the receipts and settlement (settle.go); the job's secrets, which come
// with the countersignature, live in the runner's memory from the lease to
// its release (secrets.go); handling.go says how content
// the job brought is refused and how a panic ends only its lease. The
// Provider is the role: the GPUs held and the proposals (propose.go), the
// registry of runners by lease ID, withdrawal, staging from many sources
// and before the lease (sources.go, prestage.go), the inputs laid out
// (laidout.go), Recover and Resume (restart.go), retention and the offer's
// counts. A runner is started on the provider's task group, and Shutdown
// waits for it there; it tells the role only that its lease is released.
//
// Each lease's record has its own lock, held only over memory: a change is
// made under the lock and persisted after it (update), in the order the
// changes were made. The provider's own lock guards which GPUs are held and
// which leases are active. These state locks are never held across a disk
// write, a network call or a call into another part of the node. Some locks
// order I/O instead, and say so on their field: a lease's save lock spans
// the write of its record, its receipts lock the submitter's answer and the
// ledger's write, and the layouts' lock a layout's Lstat and removal.
//
// A job that Match gives this node while its GPUs are free, but whose
// inputs are not here and laid out, is staged before its lease is proposed
// (sources.go): the GPUs wait unleased, off the meter, and the lease goes
// straight to running. The submitter lets any provider on offer do so for
// a queued job (it could propose for it anyway), and does not take the
// wait for squatting for wire.StageBeforeLeaseMax.
//
// Everything a job brings (image, inputs, the checkpoint it resumes from)
// and everything it leaves (output, checkpoints) is parsed here and may be
// hostile: each is bounded by Config.Limits or the job's request.disk, and
// what is refused ends the lease failed, attributed to the job, naming the
// layer or entry and why; a panic in a lease's goroutines ends only that
// lease (handling.go).
//
// A lease costs the submitter as few direct calls as it can: the proposal,
// the receipts (the first as the run starts), and the output request. The
// steps the submitter shows (run, output) ride on the receipts and the
// output request rather than on calls of their own; only a checkpoint, or
// an output import slower than a second, sends an event by itself.
package provider
