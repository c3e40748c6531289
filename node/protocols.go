package node

import (
	"encoding/json"

	"github.com/libp2p/go-libp2p/core/protocol"
)

// Direct-stream protocols between the two parties of a lease. Each carries
// one request and one reply (p2p.Call / p2p.Serve).
const (
	// protoLease: provider → submitter, a signed proposal; the reply is the
	// submitter's countersignature or a refusal.
	protoLease protocol.ID = "/e31/lease/1"
	// protoEvent: provider → submitter, a step reached or a checkpoint
	// taken.
	protoEvent protocol.ID = "/e31/event/1"
	// protoOutput: provider → submitter, the output's CID; the submitter
	// fetches and checks the whole DAG before it replies.
	protoOutput protocol.ID = "/e31/output/1"
	// protoReceipt: provider → submitter, a provider-signed receipt; the
	// reply is the same receipt countersigned.
	protoReceipt protocol.ID = "/e31/receipt/1"
	// protoWithdraw: submitter → provider, stop a leased job.
	protoWithdraw protocol.ID = "/e31/withdraw/1"
)

type proposeRequest struct {
	Lease SignedLease `json:"lease"`
}

type proposeReply struct {
	SubmitterSig []byte `json:"submitter_sig"`
}

type eventRequest struct {
	Lease string `json:"lease"`
	Job   string `json:"job"`
	Step  string `json:"step,omitempty"`
	At    int64  `json:"at"`
	// Checkpoint, with N, announces checkpoint N; the submitter pulls it.
	Checkpoint string `json:"checkpoint,omitempty"`
	N          int    `json:"n,omitempty"`
}

type outputRequest struct {
	Lease  string `json:"lease"`
	Job    string `json:"job"`
	Output string `json:"output"`
}

type receiptRequest struct {
	Receipt json.RawMessage `json:"receipt"`
}

type receiptReply struct {
	Receipt json.RawMessage `json:"receipt"`
}

type withdrawRequest struct {
	Lease string `json:"lease"`
	Job   string `json:"job"`
}
