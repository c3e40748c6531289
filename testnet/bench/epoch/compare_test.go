package epoch

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"
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
