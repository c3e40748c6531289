package api

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/ledger/ledgertest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from today's encoding")

// TestTypesEncodeAsPinned holds the JSON of the API: a value of each type
// with every field set encodes exactly as the pinned file, so that scripts
// reading `--json` and the dashboard keep their fields.
func TestTypesEncodeAsPinned(t *testing.T) {
	types := []any{
		&UsageQuery{}, &DebugCAR{}, &DoctorCheck{}, &DoctorReport{}, &LogOptions{}, &UILink{},
		&Error{}, &ID{}, &Disk{}, &Peer{}, &Strike{}, &GPU{}, &Node{}, &HeldRoot{}, &Step{},
		&Transfer{}, &Job{}, &TaskCounts{}, &DonePoint{}, &Attempt{}, &Part{}, &Held{}, &GPUSeen{},
		&SubmitRequest{}, &SubmitEvent{}, &GetRequest{}, &GetResult{}, &Receipts{}, &Dispute{},
		&Verify{}, &Match{}, &Block{}, &Image{}, &ImageImportRequest{}, &ImageEvent{},
		&DrainRequest{}, &Drain{}, &JobIDs{}, &TaskIDs{}, &JobUsage{}, &TaskUsage{}, &PeerRecord{},
		&Market{}, &MarketShard{}, &MarketMember{},
	}
	ledgertest.PinnedTypes(t, filepath.Join("testdata", "golden"), types, *updateGolden)
}
