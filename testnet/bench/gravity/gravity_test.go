package gravity

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench"
)

// The full configuration is held against the goals and the baseline's
// figures; the table is headed by the run's sizes and load.
func TestReportText(t *testing.T) {
	base := ConfigRun{Config: "baseline", Args: Configs()[0].Args, SubmitterSent: 8 << 20, TotalMoved: 8 << 20, ProvidersUsed: 1, Completed: 2,
		RentToRunMs: bench.Spread{P50: 100, P99: 150}, SubmitToRunMs: bench.Spread{P50: 110, P99: 160}}
	full := ConfigRun{Config: "full", SubmitterSent: 8 << 20, TotalMoved: 8 << 20, Prestaged: 8 << 20, ProvidersUsed: 1, Completed: 2,
		RentToRunMs: bench.Spread{P50: 10, P99: 25}, SubmitToRunMs: bench.Spread{P50: 20, P99: 170}}
	r := Report{DatasetBytes: 8 << 20, Jobs: 2, Providers: 1, GPUs: 1, OverS: 2, UploadLimit: "100MiB/s", Runs: []ConfigRun{base, full},
		over: 2 * time.Second, loadStart: "1.20 2.07 4.00", loadEnd: "1.02 2.00 3.95"}
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
