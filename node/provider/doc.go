// Package provider is the provider's side of a lease: it proposes the
// leases Match assigns this node, holds the GPUs, stages the inputs, runs
// the job in its sandbox, imports and hands over the output, signs receipts
// while compute is held, releases, and settles what an absent submitter
// left open; after a restart it ends and settles the leases it had.
//
// Each lease's record has its own lock, held only over memory: a change is
// made under the lock and persisted after it (update), in the order the
// changes were made. The provider's own lock guards which GPUs are held and
// which leases are active; no lock is held across a disk write, a network
// call or a call into another part of the node.
//
// A lease costs the submitter as few direct calls as it can: the proposal,
// the receipts (the first as the run starts), and the output request. The
// steps the submitter shows (run, output) ride on the receipts and the
// output request rather than on calls of their own; only a checkpoint, or
// an output import slower than a second, sends an event by itself.
package provider
