package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/scale"
)

// A short scale-bench run: the daemon hears a far network of two shards
// through six neighbours, its own probe jobs are leased by the real
// provider beside it, and every headline figure is measured. `go run
// ./testnet scale-bench` prints the same for a network of any size.
func TestScaleBenchMeasures(t *testing.T) {
	requireSandbox(t)
	o := scale.Options{Providers: 40, JobsPerS: 4, Shards: 2, Window: 8 * time.Second, Heartbeat: 2 * time.Second,
		QueueWait: 2 * time.Second, Run: 2 * time.Second, ProbeEvery: time.Second, DepartureLimit: 30 * time.Second}
	r, err := scale.Measure(context.Background(), bench.Env{Dir: t.TempDir(), Bin: bin, Log: t.Logf}, o)
	var out strings.Builder
	_ = r.WriteText(&out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	m := r.Measured
	if r.ShardProviders != 20 {
		t.Fatalf("the daemon's shard holds %d providers, want 20", r.ShardProviders)
	}
	if m.BytesInPerS <= 0 || m.BytesOutPerS <= 0 || m.CPUCores <= 0 || m.RSSBytes <= 0 || m.Passes == 0 {
		t.Fatalf("figures not measured: %+v", m)
	}
	if m.OffersDelivered < 0.9 {
		t.Fatalf("the daemon accepted %.0f%% of the far network's offers", 100*m.OffersDelivered)
	}
	if m.ProbeJobs == 0 || m.RoundsLostPer100 < 0 {
		t.Fatalf("%d probe jobs leased, rounds lost %.2f: not measured", m.ProbeJobs, m.RoundsLostPer100)
	}
	if m.DepartureS < 0 {
		t.Fatal("the silent provider never left the daemon's view")
	}
}
