package nat

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench/golden"
)

// A row without a relayed offer or a staging figure shows a dash there;
// notes follow the table.
func TestReportText(t *testing.T) {
	r := Report{Size: 4 << 20, LoadEnd: "0.40 1.06 2.94", Rows: []Row{
		{Name: "hole-punched", ToLease: 900 * time.Millisecond, ToRelayed: 18200 * time.Millisecond, Path: "direct", StagingMiBs: 42, Staging: 95 * time.Millisecond},
		{Name: "relayed (filtering router)", ToLease: 900 * time.Millisecond, ToRelayed: 18200 * time.Millisecond, Path: "relayed", Note: "the first job is still running"},
		{Name: "loopback, no NAT", ToLease: 3 * time.Second, Path: "direct", StagingMiBs: 43, Staging: 93 * time.Millisecond},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}
