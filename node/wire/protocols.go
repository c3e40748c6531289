package wire

import (
	"encoding/json"

	"github.com/e31network/e31/node/jobstate"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Direct-stream protocols between the two parties of a lease. Each carries
// one request and one reply (p2p.Call / p2p.Serve).
const (
	// ProtoLease: provider → submitter, a signed proposal; the reply is the
	// submitter's countersignature or a refusal.
	ProtoLease protocol.ID = "/e31/lease/1"
	// ProtoEvent: provider → submitter, a checkpoint taken, or a step
	// reached that no other request is about to carry (see StepAt).
	ProtoEvent protocol.ID = "/e31/event/1"
	// ProtoOutput: provider → submitter, the output's CID; the submitter
	// fetches and checks the whole DAG before it replies.
	ProtoOutput protocol.ID = "/e31/output/1"
	// ProtoReceipt: provider → submitter, a provider-signed receipt; the
	// reply is the same receipt countersigned.
	ProtoReceipt protocol.ID = "/e31/receipt/1"
	// ProtoWithdraw: submitter → provider, stop a leased job.
	ProtoWithdraw protocol.ID = "/e31/withdraw/1"
	// ProtoVerdict: submitter → provider, the submitter's signed verdict
	// on replicas of a job, one of them the provider's (VerdictRequest);
	// the reply is empty or a refusal (CodeBadVerdict and its kin).
	ProtoVerdict protocol.ID = "/e31/verdict/1"
)

// Refusal codes: the machine-readable reason a party sends with a refused
// request (p2p.Refuse on one side, p2p.RefusalCode on the other), so that
// the caller branches on a code, never on the text.
const (
	// CodeNotQueued: the submitter declines a proposal because the job is
	// no longer queued (leased elsewhere, withdrawn or over). The provider
	// closes the job in its view.
	CodeNotQueued = "not-queued"
	// CodeDeclined: the submitter declines a proposal whose terms do not
	// match the job.
	CodeDeclined = "declined"
	// CodeUnknownJob: no such job, or not under this lease.
	CodeUnknownJob = "unknown-job"
	// CodeNoOffer: the submitter declines a proposal from a provider
	// whose offer it does not hold: it cannot tell that the provider has
	// the GPUs it names, nor that its Match would choose it.
	CodeNoOffer = "no-offer"
	// CodeUnfit: the submitter declines a proposal whose provider's offer
	// does not fit the job: a GPU not in the offer or held under another
	// lease, too few CPUs or too little memory, another model, a node that
	// takes nothing new.
	CodeUnfit = "unfit"
	// CodeNotAssigned: the submitter declines a proposal that no Match of
	// its own gave the provider: neither a recent epoch's pass nor a pass
	// on its view as it stands assigned or reserved the job to it. The
	// provider keeps the job open and proposes again when its next pass
	// assigns it.
	CodeNotAssigned = "not-assigned"
	// CodeStale: the submitter declines a proposal whose time is not now:
	// proposed further than the allowed clock skew from the submitter's
	// clock, or expiring too far ahead.
	CodeStale = "stale"
	// CodeDistrusted: the submitter declines a proposal from a provider
	// whose run lost a check of results on one of its jobs, for as long
	// as its distrust lasts.
	CodeDistrusted = "distrusted"
	// CodeOtherReplica: the submitter declines a proposal for a run of a
	// check of results from the provider of another run of the same check.
	CodeOtherReplica = "other-replica"
	// CodeNoRecord: the submitter declines a proposal for a job that asks
	// for providers it has seen complete more leases (verify.min_record).
	CodeNoRecord = "no-record"
	// CodeOutsideLease: the submitter will not countersign a receipt whose
	// held time the lease does not allow (ledger.LeaseBounds): from before
	// the proposal, or past its limit and the allowances after it.
	CodeOutsideLease = "outside-lease"
	// CodeAfterFinal: the submitter will not countersign a receipt of a
	// lease already ended by a final receipt, or released.
	CodeAfterFinal = "after-final"
	// CodeCheckpointOrder: the submitter refuses a checkpoint event whose
	// number is not above the last it pulled or is pulling for the lease.
	CodeCheckpointOrder = "checkpoint-order"
	// CodeCheckpointTooLarge: the submitter refuses a checkpoint event of
	// a lease whose earlier checkpoint was larger than the job's disk can
	// hold: an honest provider caps what it imports at the disk.
	CodeCheckpointTooLarge = "checkpoint-too-large"
	// CodeBusy: the submitter will not countersign yet a final receipt
	// that names a checkpoint it was told of and is still pulling: the
	// provider offers the receipt again later.
	CodeBusy = "busy"
	// CodeStruck: a provider refuses a submitter it has struck off for a
	// while (receipts refused or never countersigned, gangs never
	// assembled); the refusal says until when.
	CodeStruck = "struck"
)

// ProposeRequest carries a provider's signed proposal (ProtoLease).
type ProposeRequest struct {
	Lease SignedLease `json:"lease"`
}

// ProposeReply carries the submitter's countersignature and, with it, the
// values of the job's secrets: the lease's stream is the one way they
// leave the submitter's node, to the provider the countersigned lease
// names, once it is countersigned (docs/protocol.md).
type ProposeReply struct {
	SubmitterSig []byte       `json:"submitter_sig"`
	Secrets      SecretValues `json:"secrets,omitempty"`
}

// EventRequest tells the submitter of a step reached or a checkpoint taken
// (ProtoEvent).
type EventRequest struct {
	Lease string        `json:"lease"`
	Job   string        `json:"job"`
	Step  jobstate.Step `json:"step,omitempty"`
	At    int64         `json:"at"`
	// Checkpoint, with N, announces checkpoint N; the submitter pulls it.
	Checkpoint string `json:"checkpoint,omitempty"`
	N          int    `json:"n,omitempty"`
}

// StepAt is a step the provider reached (run or output) and when, in Unix
// ms, told along with a request the lease needs anyway.
type StepAt struct {
	Step jobstate.Step `json:"step"`
	At   int64         `json:"at"`
}

// OutputRequest hands the submitter the output's CID (ProtoOutput).
type OutputRequest struct {
	Lease  string `json:"lease"`
	Job    string `json:"job"`
	Output string `json:"output"`
	// Steps are the steps the lease has reached so far, as in
	// ReceiptRequest.
	Steps []StepAt `json:"steps,omitempty"`
	// Skipped names what the output leaves out (at most a few dozen), and
	// why: a link pointing out of the output, a device node.
	Skipped []string `json:"skipped,omitempty"`
	// KeptUntil is when the provider stops keeping the output, its
	// checkpoints and the job's inputs (Unix ms): its retention window
	// after release.
	KeptUntil int64 `json:"kept_until,omitempty"`
}

// ReceiptRequest carries a receipt the provider signed (ProtoReceipt).
type ReceiptRequest struct {
	Receipt json.RawMessage `json:"receipt"`
	// Steps are the steps the lease has reached so far (run, output), so
	// that a step needs no ProtoEvent call of its own: the first receipt
	// comes as the run starts. The submitter records those it lacks; they
	// are not part of the signed receipt.
	Steps []StepAt `json:"steps,omitempty"`
}

// ReceiptReply carries the receipt countersigned, or, when the submitter
// will not countersign a final receipt that claims more than it saw, its
// own one-sided record of the lease: the two then record a dispute.
type ReceiptReply struct {
	Receipt json.RawMessage `json:"receipt"`
	Dispute json.RawMessage `json:"dispute,omitempty"`
}

// WithdrawRequest asks the provider to stop a leased job (ProtoWithdraw).
type WithdrawRequest struct {
	Lease string `json:"lease"`
	Job   string `json:"job"`
}
