package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/bench/flood"
	flooder "github.com/e31network/e31/testnet/byzantine/flood"
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

// Twenty fresh identities, each declaring as many array tasks as one
// submitter may hold in a view (100,000, in arrays of 10,000) and a
// thousand single jobs besides, five of them of the largest size a
// requeue carries, re-announced round after round, do not fill the views
// (issue 51): every daemon's view is held to its bounds, refusing and
// evicting the flood's newest and largest, every daemon's resident memory
// stays under 1 GiB, and honest jobs submitted once the views are full
// are leased and complete. The flood is paced (30 requeues a second) so
// that three daemons on two cores take it in; `go run ./testnet
// flood-bench --mode caps` measures ten thousand single jobs an identity.
func TestFloodOfCaps(t *testing.T) {
	requireSandbox(t)
	o := flood.CapsOptions{Nodes: 3, GPUs: 2, Jobs: 3,
		Hoard: flooder.HoardConfig{Identities: 20, Singles: 1000, Big: 5, Rate: 30}}
	r, err := flood.MeasureCaps(context.Background(), bench.Env{Dir: t.TempDir(), Bin: bin, Log: t.Logf}, o)
	var out strings.Builder
	_ = r.WriteText(&out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != r.Submitted {
		t.Fatalf("honest jobs: %d/%d completed", r.Completed, r.Submitted)
	}
	const rssBound = 1 << 20 // KiB: 1 GiB
	for _, d := range r.Daemons {
		if d.PeakKiB >= rssBound {
			t.Errorf("%s held %s at most, over 1 GiB", d.Name, bench.HumanBytes(d.PeakKiB<<10))
		}
		// A view may pass its bounds only by its own node's jobs.
		if d.HeldJobs > view.DefaultJobs+float64(o.Jobs) || d.HeldBytes > float64(view.DefaultDeclarationBytes+o.Jobs<<10) {
			t.Errorf("%s's view held %.0f jobs and %.0f bytes, over its bounds", d.Name, d.HeldJobs, d.HeldBytes)
		}
		if d.Evicted[view.BoundJobs]+d.Refused[view.BoundJobs] == 0 {
			t.Errorf("%s's view neither refused nor evicted a job: the flood did not reach its bound", d.Name)
		}
	}
}
