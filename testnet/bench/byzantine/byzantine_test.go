package byzantine

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench/golden"
)

// The two batches are a table, then the extra time and, for each
// byzantine provider in peer ID order, the jobs that avoided it.
func TestReportText(t *testing.T) {
	r := Report{
		Honest: 1, Byzantine: 2,
		Clean:         Batch{Submitted: 2, Completed: 2, Makespan: 2263 * time.Millisecond, Latency: []time.Duration{time.Second, 2 * time.Second}},
		WithByzantine: Batch{Submitted: 2, Completed: 1, Makespan: 3 * time.Second, Latency: []time.Duration{3 * time.Second}, Avoided: map[string]int{"12D3KooWBBBBBBBB": 1}},
		Names:         map[string]string{"12D3KooWBBBBBBBB": "silent", "12D3KooWAAAAAAAA": "squat"},
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}
