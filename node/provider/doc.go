// Package provider is the provider's side of a lease: it proposes the
// leases Match assigns this node, holds the GPUs, stages the inputs, runs
// the job in its sandbox, imports and hands over the output, signs receipts
// while compute is held, releases, and settles what an absent submitter
// left open; after a restart it ends and settles the leases it had.
//
// # The role and its parts
//
// The Provider is the role (provider.go). It proposes (propose.go) and
// keeps its parts, each a type with its own state and lock, set up in New
// and shared through env, which never changes after:
//
//   - holds (holds.go): the GPUs held, each for a proposal in flight or a
//     signed lease, and the jobs with a proposal in flight. A GPU held for
//     a proposal still shows free in the offer: only a signed lease changes
//     it, so that every peer's view changes once.
//   - registry (registry.go): the runners of the leases not yet released,
//     by lease ID, which are not yet settled, and the withdrawals heard;
//     withdrawal, a stop before the run, and the drains' preemption go
//     through it.
//   - drain (drain.go): what drains the node, its owner (saved), the
//     reclaim watcher or a stop of the daemon; its methods are the
//     Provider's. Its state lock guards memory and its ordering lock spans
//     each change of the owner's drain and the write of its record, so
//     that the store ends as the API last answered.
//   - openHours (hours.go): the contributor's hours (Config.Hours), which
//     the offer shows and the proposals keep to; at a window's end what
//     runs is drained quickly.
//   - retention (retention.go): what settled leases keep for their
//     submitters, released once the retention window has passed, or early
//     while the disk is short.
//   - strikes (strikes.go): the submitters struck off for refusing
//     receipts, disputing, or letting their gangs lapse; kept in the
//     record store, so a restart does not forgive them.
//   - diskGrants (room.go): each job's disk, granted out of the data dir's
//     free space when its lease is proposed (Deps.Room), and given back as
//     the lease goes.
//   - sourcing (sources.go, prestage.go): staging from many sources, and
//     before the lease; layouts (laidout.go): the inputs laid out for the
//     runs.
//
// Recover and Resume (restart.go) load what a previous run left (the
// leases, the owner's drain, the strikes), end and settle the leases left
// open (a restart never re-adopts a container), and start the loops:
// retention, the disk's watch, the hours' watch.
//
// # A lease's runner
//
// Each signed lease is carried through its life by a leaseRunner of its
// own (runner.go), as nomad's task runner carries a task; it holds the
// lease's state (leasestate.go: the record, its locks and persistence, the
// job's secrets in memory only, secrets.go) and goes through one phase a
// file:
//
//   - staging (stage.go): the job's disk, the inputs, the image, the
//     checkpoint to resume from;
//   - a gang part's join (gang.go): its gang lease, signed by every party,
//     then its private network (node/gangnet) and a link to every other
//     part, before its run starts inside that network;
//   - the run (runjob.go), with its checkpoints (checkpoint.go,
//     ckptfolder.go);
//   - the output (output.go): import and hand-over;
//   - release (release.go): the meter stops, the GPUs go back, the lease's
//     folder goes;
//   - settlement (settle.go): the final receipt and the output's
//     hand-over, retried for the retention window; the receipts
//     themselves, interim and final, are a type of their own with an
//     ordering lock (receipts.go).
//
// A runner is started on the provider's task group, and Shutdown waits for
// it there; it tells the role only that its lease is released and settled.
// handling.go says how content the job brought is refused and how a panic
// ends only its lease.
//
// # Locks
//
// A state lock guards memory and is never held across a disk write, a
// network call or a call into another part: a change is made under it and
// persisted after it. Some locks order I/O instead, and say so on their
// field: a lease's save lock spans the write of its record, its receipts'
// lock the submitter's answer and the ledger's write, the drain's save lock
// the write of the owner's drain, and the layouts' lock a layout's Lstat
// and removal. An ordering lock is never waited for under a state lock.
//
// # The job's disk
//
// Each job writes on a disk of its own of request.disk (exec.MountDisk),
// mounted in the lease folder before staging, so that a resumed run's
// checkpoint is laid out on it; the output, the checkpoints and the job's
// /tmp live there, and the result is gathered there too, so that moving
// the output into it stays a rename. A job that fills it ends failed, the
// job's doing, "wrote more than request.disk N". The disk goes before the
// lease folder does (cleanup), and after a crash Resume sweeps every disk
// left, mounted or not. A job whose disk, output and inputs the data dir
// has no room for beside its reserve and the other jobs' grants is not
// proposed for, and the offer says the largest disk this node can grant
// now, so Match does not assign it there. A provider started with
// --cpu-jobs=false proposes no job that asks for no GPU (Config.NoCPUJobs).
//
// Before each run the provider asks the driver again which GPUs it has
// (Deps.SeeGPUs) and keeps the leased ones as it found them; the final
// receipt, which both sides sign, carries them (ledger.GPUSeen), so what
// the job ran on is provable from the record.
//
// # Staging before the lease
//
// A job that Match gives this node while its GPUs are free, but whose
// inputs are not here and laid out, is staged before its lease is proposed
// (sources.go): the GPUs wait unleased, off the meter, and the lease goes
// straight to running. The submitter lets any provider on offer do so for
// a queued job (it could propose for it anyway), and does not take the
// wait for squatting for wire.StageBeforeLeaseMax.
//
// # Hostile content
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
