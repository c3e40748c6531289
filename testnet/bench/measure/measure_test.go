package measure

import (
	"strings"
	"testing"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/golden"
)

// Every figure is one line, held against its goal, under a line that
// names its network.
func TestReportText(t *testing.T) {
	r := Report{LoadStart: "1.33 2.52 4.43", LoadEnd: "1.59 2.48 4.37",
		Gossip: gossipReport{Nodes: 2, GPUsPerNode: 2, StartedS: 0.27, ConvergedS: 0.79, IdleRSSMiB: bench.Spread{Min: 42, P50: 42, Max: 42.8},
			Observations: 9, LatencyMs: bench.Spread{P50: 1.8, P99: 3.1, Max: 3.1}, Publishes: 9, SeenByAll: 9,
			LastObserverMs: bench.Spread{P50: 1.8, P99: 3.1}, PollErrors: 1, Load: "1.31 2.46 4.38"},
		Jobs: []jobsReport{{Nodes: 2, GPUsPerNode: 4, Epoch: "1s (default)", Jobs: 3, RentMs: bench.Spread{P50: 4, P99: 10, Max: 10},
			Outcomes: map[string]int{"completed": 2, "failed": 1}, ReadvertisedMs: bench.Spread{P50: 9, Max: 1200}, Readvertised: 3,
			Observer: "node1", Load: "1.21 2.42 4.36"}},
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}
