// Package submitter is the submitter's side of a job: it validates, signs
// and broadcasts declarations, accepts one provider's proposal per job,
// records the steps the provider reports, pulls checkpoints as they are
// taken, fetches and checks the output, countersigns receipts, watches for
// a provider gone silent (ending its lease as provider-lost and resuming the
// job where asked), re-announces queued jobs, and withdraws jobs on request.
// It also catches providers that fail its jobs without going silent
// (avoid.go): one that squats on an assignment, signs a lease and never
// runs it, or withholds its receipts is named in the job's avoid list, and
// a lease never run is released and the job put back in the queue. A job's
// secrets are kept apart from its record, keyed by the job as submitted,
// sent only with the countersignature of a lease, and dropped once the job
// has ended for good (secrets.go).
//
// Each job has a jobTracker (tracker.go), as each task in nomad has its
// task runner: it holds the job's record, its locks, its version and the
// followers waiting on it, and it handles what the job's provider sends
// (its proposal, its events and checkpoints, its output, its receipts),
// persisting each change. The Submitter keeps the registry of trackers by
// job ID (registry.go; memory.go moves ended jobs out to the record store
// and back), the loops over all jobs (the provider watch, the requeue, the
// eviction), Submit and Withdraw, Recover and the queries, and routes each
// provider's stream to the job's tracker (handlers.go).
//
// Two kinds of lock, each field saying which it is. A state lock (the
// Submitter's, the registry's, the stage's and each tracker's mu) guards
// memory and is held only over it: a change is made under the tracker's mu
// and persisted after it (update); nothing under a state lock writes to
// disk, calls out or calls into another part of the node. An ordering
// lock spans I/O on purpose, to keep its order: a tracker's save is held
// across the write of its record, so the writes land in the order the
// changes were made, and its receipts lock across the ledger's reads and
// append of the lease's receipts, which go one at a time, each linked to
// the last. No ordering lock is waited for under a state lock (the
// registry only tries them, to evict a job): the order is receipts, save,
// then the state locks, a tracker's mu innermost.
//
// A final receipt names the GPUs the provider's sandbox found before the
// run. The submitter countersigns it all the same (the compute was held),
// then compares them with the lease's GPUs, the model they were offered
// as and the declared gpu_model, and keeps any difference on the job's
// record (gpu_mismatch in its status): the countersigned receipt in both
// ledgers is the proof.
package submitter
