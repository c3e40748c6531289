package epoch

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench/golden"
)

// The table has one line per mode and latency, the runs' mean beside the
// extremes, in the order Compare measured them.
func TestReportText(t *testing.T) {
	runs := []Result{{Jobs: 20, Lost: 1, Declined: 2, MeanDelay: 150 * time.Millisecond, MaxDelay: 150 * time.Millisecond, ToLeaseMean: 750 * time.Millisecond}}
	r := Report{Rows: []Row{
		{Latency: 50 * time.Millisecond, Mode: Before, Jobs: 20, Runs: runs, Summary: Summarise(runs)},
		{Latency: 50 * time.Millisecond, Mode: Adaptive, Jobs: 20, Runs: runs[:0], Summary: Summarise(nil)},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}
