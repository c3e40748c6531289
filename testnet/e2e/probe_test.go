package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// TestProbeFakeModel: a provider that offers a GPU model it lacks
// (--misbehave fake-model: B300 for its simulated H100) is caught by the
// GPU probe before the run. A job that asks for B300 goes to it alone:
// its lease ends failed, by the provider, "gpu probe failed: ...", on a
// final receipt both signed, with nothing owed, and the job goes back to
// the queue avoiding the provider. Jobs that ask for no model complete on
// the honest provider, wherever Match placed them first, and every lease
// the faker got ends the same way at the probe.
func TestProbeFakeModel(t *testing.T) {
	b := byzantineBin(t)
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB"},
		Misbehave:     []string{"", "", "fake-model"},
		Heartbeat:     500 * time.Millisecond, Args: byzArgs, Bin: b,
	})
	sub := c.Client(0)
	honest, faker := c.Nodes[1].PeerID, c.Nodes[2].PeerID

	d := decl("probe-b300", "echo done > /out/result", 1, time.Minute)
	d.Request.GPUModel = "B300" // only the faker claims it
	fj := submit(t, sub, d)
	fj = waitJob(t, sub, fj.ID, time.Minute, "the faker avoided after the probe", func(j api.Job) bool {
		return slices.Contains(j.Avoid, faker)
	})
	if fj.State != api.JobQueued || fj.Output != "" {
		t.Fatalf("the B300 job is %s with output %q after its probe failed, want queued with none", fj.State, fj.Output)
	}

	var ids []string
	for i := range 3 {
		ids = append(ids, submit(t, sub, decl(fmt.Sprintf("probe-any-%d", i), "echo done > /out/result", 1, time.Minute)).ID)
	}
	for _, id := range ids {
		j := waitJob(t, sub, id, 2*time.Minute, "release", released)
		if j.Outcome != string(ledger.OutcomeCompleted) || j.Provider != honest || j.Output == "" {
			t.Fatalf("job %s ended %s/%s (%s) on %s with output %q, want completed on the honest %s", id, j.Outcome, j.Attribution, j.Reason, j.Provider, j.Output, honest)
		}
	}

	fakerLeases := 0
	for _, id := range append(ids, fj.ID) {
		for _, r := range receipts(t, sub, id) {
			if r.Provider.String() != faker || !r.Final {
				continue
			}
			fakerLeases++
			if r.OneSided() || r.Outcome != ledger.OutcomeFailed || r.Attribution != ledger.AttributionProvider ||
				!strings.HasPrefix(r.Reason, ledger.ReasonGPUProbe+": ") || r.Phases.Run != 0 {
				t.Errorf("job %s: the faker's lease %s ended %s/%s (%q, run %gs, one-sided %t), want failed by the provider at the probe, signed by both",
					id, r.Lease, r.Outcome, r.Attribution, r.Reason, r.Phases.Run, r.OneSided())
			}
			if ledger.DefaultPolicy().Owes(ledger.Cause{Outcome: r.Outcome, Attribution: r.Attribution}) {
				t.Errorf("job %s: the faker's lease %s is owed", id, r.Lease)
			}
			t.Logf("job %s: the faker's lease %s ended at the probe: %s", id, r.Lease, r.Reason)
		}
	}
	if fakerLeases == 0 {
		t.Fatal("no final receipt of the faker's lease of the B300 job")
	}
	found := false
	for _, tot := range usage(t, sub).ByPeer {
		if tot.Peer.String() != faker {
			continue
		}
		found = true
		if tot.Owed != 0 {
			t.Errorf("usage owes the faker %v GPU-hours (held %v)", tot.Owed, tot.GPUHours)
		}
	}
	if !found {
		t.Error("the faker's leases are not in the submitter's usage")
	}
	fj = waitJob(t, sub, fj.ID, time.Second, "still avoiding the faker", func(j api.Job) bool { return slices.Contains(j.Avoid, faker) })
	t.Logf("%d leases of the faker ended at the probe; the B300 job waits: %s", fakerLeases, fj.Reason)
}
