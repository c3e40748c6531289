package submitter

// A job's tracker acts on the job in phases, each a type over the tracker
// with the methods of its phase and no state of its own: its state is the
// tracker's, under the tracker's locks (tracker.go). The proposal is the
// tracker's own (proposal.go); then:
//
//   - runPhase: the run's steps and checkpoints, and its output
//     (progress.go);
//   - receiptPhase: the receipts, checked, countersigned and stored
//     (receipt.go, claims.go);
//   - lossWatch: a provider gone silent, its lease ended as provider-lost
//     (watch.go);
//   - failureWatch: a provider that fails the job without going silent,
//     avoided, and the job put back in the queue (avoid.go, requeue.go).

// runPhase is a job's run as its provider reports it (progress.go).
type runPhase struct{ *jobTracker }

// receiptPhase is a job's receipts (receipt.go).
type receiptPhase struct{ *jobTracker }

// lossWatch watches a job's provider for silence (watch.go).
type lossWatch struct{ *jobTracker }

// failureWatch catches a provider that fails the job without going silent
// (avoid.go).
type failureWatch struct{ *jobTracker }
