package gravity

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/golden"
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
	golden.Check(t, "testdata/report.txt", b.String())
}
