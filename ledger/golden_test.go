package ledger_test

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from today's encoding")

// TestSigningBytesAsPinned holds what a receipt's signatures cover, for a
// receipt with every field set, a one-sided record and a receipt with only
// the fields of the first version: a change to any of them would make every
// stored signature fail to verify.
func TestSigningBytesAsPinned(t *testing.T) {
	var full ledger.Receipt
	ledgertest.FillAll(&full)
	oneSided := full
	oneSided.Signer = ledger.SignerProvider
	two := full
	two.Signer = ""
	two.Evidence = nil
	first := ledger.Receipt{Lease: two.Lease, Job: two.Job, Provider: two.Provider, Submitter: two.Submitter,
		GPUs: two.GPUs, Seq: two.Seq, Final: true, HeldFrom: two.HeldFrom, HeldUntil: two.HeldUntil,
		Phase: two.Phase, Outcome: two.Outcome, ExitCode: two.ExitCode, Output: two.Output}
	for name, r := range map[string]*ledger.Receipt{"two-sided": &two, "one-sided": &oneSided, "first": &first} {
		t.Run(name, func(t *testing.T) {
			enc, err := json.MarshalIndent(r, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got := hex.Dump(r.SigningBytes()) + "digest " + r.Digest() + "\n" + string(enc) + "\n"
			ledgertest.Pinned(t, filepath.Join("testdata", "golden", "receipt-"+name+".txt"), []byte(got), *updateGolden)
		})
	}
}
