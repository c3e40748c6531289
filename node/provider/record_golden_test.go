package provider

import (
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/ledger/ledgertest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from today's encoding")

// TestRecordStoresAsPinned holds the JSON a record is stored as, with every
// field set: a node restarted on a newer build reads its records back.
func TestRecordStoresAsPinned(t *testing.T) {
	var r Record
	ledgertest.FillAll(&r)
	got, err := json.MarshalIndent(&r, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.Pinned(t, filepath.Join("testdata", "golden", "record.json"), append(got, '\n'), *updateGolden)
}
