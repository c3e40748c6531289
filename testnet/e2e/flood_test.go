package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/flood"
)

// Honest jobs complete while two strangers flood the gossip: one with
// valid declarations from fresh identities (Sybil), one mixing those with
// invalid and oversized messages. The mixed flooder is graylisted by every
// daemon; the Sybil flood is held to the per-peer rate limits. The figures
// of issue 16 are logged: `go run ./testnet flood-bench` prints the same
// for a longer run.
func TestByzantineFlood(t *testing.T) {
	requireSandbox(t)
	o := flood.Options{Nodes: 3, GPUs: 2, Jobs: 6, Window: 10 * time.Second, SybilRate: 300, MixedRate: 60}
	r, err := flood.Measure(context.Background(), bench.Env{Dir: t.TempDir(), Bin: bin, Log: t.Logf}, o)
	var out strings.Builder
	_ = r.WriteText(&out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Flood.Completed != r.Flood.Submitted || r.Quiet.Completed != r.Quiet.Submitted {
		t.Fatalf("honest jobs: %d/%d completed in the flood, %d/%d quiet", r.Flood.Completed, r.Flood.Submitted, r.Quiet.Completed, r.Quiet.Submitted)
	}
	if r.Graylisting != o.Nodes {
		t.Fatalf("the mixed flooder was graylisted by %d of %d daemons", r.Graylisting, o.Nodes)
	}
	// Six invalid messages graylist it on each daemon, and it sends a
	// valid one between every invalid or oversized pair: at most three
	// valid ones per daemon can spread before that.
	if r.MixedAccepted > 3*o.Nodes {
		t.Fatalf("%d of the mixed flooder's valid messages spread, want at most %d", r.MixedAccepted, 3*o.Nodes)
	}
	if r.Rejected["oversized"] == 0 || r.Rejected["malformed"]+r.Rejected["forged"]+r.Rejected["unsigned"]+r.Rejected["invalid"] == 0 {
		t.Fatalf("rejections %v: the invalid flood did not reach the validators", r.Rejected)
	}
	if r.SybilSent == 0 || r.Limited["new-submitter"] == 0 {
		t.Fatalf("the Sybil flood sent %d and the limits dropped %v: it did not exceed them", r.SybilSent, r.Limited)
	}
}
