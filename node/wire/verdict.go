package wire

import "encoding/json"

// VerdictRequest carries a submitter's verdict on replicas of a job to a
// provider whose lease it names (ProtoVerdict). The provider keeps it in
// its ledger once it has checked it against the final receipt of its own
// lease.
type VerdictRequest struct {
	// Verdict is the verdict as ledger.MarshalVerdict writes it, decoded
	// with ledger.UnmarshalVerdict.
	Verdict json.RawMessage `json:"verdict"`
}

// Refusal codes of ProtoVerdict.
const (
	// CodeBadVerdict: the verdict does not decode or verify, or comes from
	// a peer other than the submitter who signed it.
	CodeBadVerdict = "bad-verdict"
	// CodeNoReceipt: the verdict names no lease of this provider whose
	// final receipt, countersigned by the verdict's submitter, it holds.
	CodeNoReceipt = "no-receipt"
	// CodeWrongOutput: the verdict says this provider's lease gave an
	// output other than the one its final receipt names.
	CodeWrongOutput = "wrong-output"
)
