package provider

import (
	"testing"

	"github.com/e31network/e31/p2p/peertext"
)

// A reason may quote what the job left (a path in its output, a layer's
// entry name), so the job controls part of it: what the final receipt
// carries holds nothing a terminal would obey, since the submitter refuses
// a receipt that does (ledger.DecodeReceipt).
func TestClipReasonIsOnePrintableLine(t *testing.T) {
	got := clipReason("import output: lstat /out/x\x1b]52;c;cHduZWQ=\a\u202e:\nno such file")
	if err := peertext.Check(got); err != nil {
		t.Fatalf("reason %q: %v", got, err)
	}
	if want := "import output: lstat /out/x]52;c;cHduZWQ=: no such file"; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
}
