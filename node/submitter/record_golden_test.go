package submitter

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/e31network/e31/ledger/ledgertest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from today's encoding")

// TestRecordStoresAsPinned holds the JSON a record is stored as, with every
// field set: a node restarted on a newer build reads its records back. The
// pinned record reads into a Record and writes back byte for byte, and a
// Record with every field set has the pinned record's fields, no more and
// no fewer. (The record's optional parts are embedded structs, which
// ledgertest.FillAll numbers as values of their own: the values it fills
// differ from the pinned ones, the fields do not.)
func TestRecordStoresAsPinned(t *testing.T) {
	path := filepath.Join("testdata", "golden", "record.json")
	var r Record
	ledgertest.FillAll(&r)
	filled, err := json.MarshalIndent(&r, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		ledgertest.Pinned(t, path, append(filled, '\n'), true)
		return
	}
	pinned, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(pinned, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(&back, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	ledgertest.Pinned(t, path, append(again, '\n'), false)
	if got, want := jsonShape(t, filled), jsonShape(t, pinned); !reflect.DeepEqual(got, want) {
		t.Errorf("a record with every field set has other fields than the pinned one:\n%s", filled)
	}
}

// filledKey is a map key as ledgertest.FillAll fills one.
var filledKey = regexp.MustCompile(`^s[0-9]+$`)

// jsonShape is a JSON document with every leaf value blanked: its fields
// and their nesting only.
func jsonShape(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var blank func(v any) any
	blank = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				if filledKey.MatchString(k) {
					k = "*" // a map's key, filled as a value
				}
				out[k] = blank(e)
			}
			return out
		case []any:
			for i, e := range x {
				x[i] = blank(e)
			}
			return x
		}
		return nil
	}
	return blank(v)
}
