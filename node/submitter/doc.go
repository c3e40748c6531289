// Package submitter is the submitter's side of a job: it validates, signs
// and broadcasts declarations, accepts one provider's proposal per job,
// records the steps the provider reports, pulls checkpoints as they are
// taken, fetches and checks the output, countersigns receipts, watches for
// a provider gone silent or failing the job, re-announces queued jobs,
// goes on with a job that asks to, and withdraws jobs on request.
//
// # The tracker
//
// Each attempt of a job has a jobTracker (tracker.go), as each task in
// nomad has its task runner: it holds the attempt's Record (record.go, a
// core with optional parts embedded), its locks, its version and the
// followers waiting on it, and persists each change. It acts on the job in
// phases, each a type over it (phases.go): the proposal (proposal.go), the
// run's steps, checkpoints and output (runPhase, progress.go), the
// receipts (receiptPhase, receipt.go). Before it countersigns a proposal,
// claimCheck holds the proposal's claims against this node's view and
// Match (claims.go); before it countersigns a receipt, the receipt against
// the lease (claims.go, gpus_seen.go). The provider watch acts on it too:
// a provider gone silent ends its lease as provider-lost (lossWatch,
// watch.go); one that squats on an assignment, signs a lease and never
// runs it, or withholds its receipts is found (failureWatch, avoid.go),
// named in the job's avoid list, and the job put back in the queue
// (requeue.go).
//
// # The groups above the trackers
//
// As nomad's allocrunner stands above its task runners, a type per group
// of trackers stands above them, each the handle (handle.go) the registry
// hands out for a job: what the user asks of a job (its view, withdraw,
// resume, the output a job:ID/out source reads) goes to its handle, which
// answers for its kind. handleOf reads the kind from the record
// (kinds.go).
//
//   - chain (attempts.go): a job and its attempts. Each resumption, retry
//     or move off a preempted provider is an attempt of its own, chained
//     to the one before; the job is shown merged, as its last attempt.
//     resume.go submits the next attempt, by hand or by itself (its claim
//     on disk first), under the kit's resuming lock; withdraw.go withdraws
//     the last.
//   - arrayRun (array.go): an array, whose tasks are each a chain of their
//     own; its view counts them (tally.go), and their leases and releases
//     are announced in batches (taskbatch.go).
//   - heldJob (hold.go): a job held on this node until its upstreams
//     (after, after_any) end, released as its first attempt, then shown as
//     the chain (or array) it became; the hold loop releases it.
//   - gangs (gang.go): an array whose parts run together, assembled under
//     one gang lease, ended whole and resumed whole. Each gang attempt not
//     over has a gangRun with its own loop (gangrun.go,
//     gangrun_assembly.go), held by the gangs registry (gangs.go), which
//     also shows (gang_view.go), resumes and withdraws a gang whole
//     (gang_resume.go); gangHandle and what the gangs reach through the
//     kit are in gangkit.go.
//
// The kit (kit.go) is what these share: the registry of trackers
// (registry.go; memory.go moves ended jobs out to the record store and
// back, recover.go loads them at start) and the resuming lock. The intake
// (submit.go, import.go) takes new jobs and attempts in: it makes the
// declaration exact, keeps the job's secrets (secrets.go), pins what a
// provider fetches (pins.go), signs and broadcasts. A job's secrets are
// kept apart from its record, keyed by the job as submitted, sent only
// with the countersignature of a lease, and dropped once the job has
// ended for good.
//
// # The Submitter
//
// The Submitter (submitter.go) holds the kit and the intake, the parts of
// the node it acts through (deps.go), the loops over all jobs (the
// provider watch, the requeue, the eviction, the hold loop, the task
// batches), the queries (queries.go) and the logs (logs.go), and routes
// each provider's stream to the job's tracker (handlers.go, stage.go).
//
// # Locks
//
// Two kinds of lock, each field saying which it is. A state lock (the
// Submitter's, the registry's, the stage's and each tracker's mu) guards
// memory and is held only over it: a change is made under the tracker's mu
// and persisted after it (update); nothing under a state lock writes to
// disk, calls out or calls into another part of the node. An ordering
// lock spans I/O on purpose, to keep its order: the kit's resuming is held
// across a resumption's submit and a held job's release, so that an
// attempt is continued once; a tracker's save is held across the write of
// its record, so the writes land in the order the changes were made, and
// its receipts lock across the ledger's reads and append of the lease's
// receipts, which go one at a time, each linked to the last. No ordering
// lock is waited for under a state lock (the registry only tries them, to
// evict a job): the order is resuming, receipts, save, then the state
// locks, a tracker's mu innermost.
//
// A final receipt names the GPUs the provider's sandbox found before the
// run. The submitter countersigns it all the same (the compute was held),
// then compares them with the lease's GPUs, the model they were offered
// as and the declared gpu_model, and keeps any difference on the job's
// record (gpu_mismatch in its status): the countersigned receipt in both
// ledgers is the proof.
package submitter
