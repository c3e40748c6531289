package nat

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench/golden"
)

// A row without a staging figure shows a dash there; notes follow the
// table.
func TestReportText(t *testing.T) {
	r := Report{Size: 4 << 20, LoadEnd: "0.40 1.06 2.94", Rows: []Row{
		{Name: "dropping router", ToLease: 900 * time.Millisecond, Path: "direct", StagingMiBs: 42, Staging: 95 * time.Millisecond},
		{Name: "filtering router", ToLease: 1200 * time.Millisecond, Path: "relayed-data", StagingMiBs: 30, Staging: 133 * time.Millisecond},
		{Name: "loopback, no NAT", ToLease: 3 * time.Second, Path: "relayed", Note: "the job ended failed/network: staging"},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}
