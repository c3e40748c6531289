// Package submitter is the submitter's side of a job: it validates, signs
// and broadcasts declarations, accepts one provider's proposal per job,
// records the steps the provider reports, pulls checkpoints as they are
// taken, fetches and checks the output, countersigns receipts, watches for
// a provider gone silent (ending its lease as provider-lost and resuming the
// job where asked), re-announces queued jobs, and withdraws jobs on request.
// It also catches providers that fail its jobs without going silent
// (avoid.go): one that squats on an assignment, signs a lease and never
// runs it, or withholds its receipts is named in the job's avoid list, and
// a lease never run is released and the job put back in the queue.
//
// One lock guards the jobs and their records, held only over memory: a
// change is made under it and persisted after it (update), in the order
// the changes were made; a job's receipts go one at a time under the job's
// own receipt lock. No lock is held across a disk write, a network call or
// a call into another part of the node.
//
// A final receipt names the GPUs the provider's sandbox found before the
// run. The submitter countersigns it all the same (the compute was held),
// then compares them with the lease's GPUs, the model they were offered
// as and the declared gpu_model, and keeps any difference on the job's
// record (gpu_mismatch in its status): the countersigned receipt in both
// ledgers is the proof.
package submitter
