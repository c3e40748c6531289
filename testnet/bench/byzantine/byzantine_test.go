package byzantine

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"
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
	golden(t, "testdata/report.txt", b.String())
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the file at path, or with -update rewrites it.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant (%s; go test -update rewrites it)\n%s", got, path, want)
	}
}
