package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// What runs on a contributor's GPU, as e31 leases tells it: a job node0
// submits runs on node1, the only node with a GPU, and shows in node1's
// e31 leases --json with its job, its submitter, node1's GPU and the phase
// running; once withdrawn, it leaves the live list for e31 leases
// --history --json, with the same GPU-hours held and owed as node1's e31
// usage counts for the job.
func TestLeasesShowWhatRunsOnTheGPU(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sub, prov := c.Nodes[0], c.Nodes[1]
	j := submit(t, sub.Client(), decl("on-your-gpu", "sleep 600", 1, 5*time.Minute))

	var live api.Lease
	poll.Until(t, "node1's e31 leases to show the job running", 90*time.Second, func() bool {
		ls := leasesJSON[[]api.Lease](t, ctx, prov.API, "leases", "--json")
		for _, l := range ls {
			if l.Job == j.ID && l.Phase == "running" {
				live = l
				return true
			}
		}
		return false
	})
	if live.Submitter != sub.PeerID || live.Name != "on-your-gpu" || len(live.GPUs) != 1 ||
		!strings.HasPrefix(live.GPUs[0].UUID, "GPU-") || !strings.Contains(live.GPUs[0].Model, "H100") ||
		live.HeldSince.IsZero() || live.Limit != 300 || live.EndsBy.IsZero() {
		t.Fatalf("node1's live lease %+v: want job %s of submitter %s on one H100, held since its start, limit 300 s", live, j.ID, sub.PeerID)
	}
	// The table a person reads says the same.
	if out, code := runE31(t, ctx, prov.API, "leases"); code != 0 || !strings.Contains(out, live.ID) || !strings.Contains(out, j.ID) ||
		!strings.Contains(out, "on-your-gpu") || !strings.Contains(out, "1× "+live.GPUs[0].Model) {
		t.Fatalf("e31 leases on node1: exit %d\n%s", code, out)
	} else {
		t.Logf("e31 leases on node1:\n%s", out)
	}
	if got := waitJob(t, sub.Client(), j.ID, 30*time.Second, "the job's lease", func(a api.Job) bool { return a.Lease != "" }); got.Lease != live.ID || got.Provider != prov.PeerID {
		t.Fatalf("the submitter has lease %s with %s; node1 lists lease %s", got.Lease, got.Provider, live.ID)
	}
	// Its receipts so far are billed as they come: an interim receipt a
	// second.
	poll.Until(t, "the live lease to be billed by its receipts", 60*time.Second, func() bool {
		for _, l := range leasesJSON[[]api.Lease](t, ctx, prov.API, "leases", "--json") {
			if l.ID == live.ID && l.Billed.GPUHours > 0 && l.Billed.OwedGPUHours == l.Billed.GPUHours && !l.Billed.Until.IsZero() {
				return true
			}
		}
		return false
	})

	if out, code := runE31(t, ctx, sub.API, "withdraw", j.ID); code != 0 {
		t.Fatalf("e31 withdraw %s: exit %d\n%s", j.ID, code, out)
	}
	var ended api.EndedLease
	poll.Until(t, "node1's e31 leases --history to list the ended lease", 90*time.Second, func() bool {
		for _, l := range leasesJSON[[]api.EndedLease](t, ctx, prov.API, "leases", "--history", "--json") {
			if l.ID == live.ID {
				ended = l
				return true
			}
		}
		return false
	})
	for _, l := range leasesJSON[[]api.Lease](t, ctx, prov.API, "leases", "--json") {
		if l.ID == live.ID {
			t.Fatalf("lease %s is in the history and still live: %+v", l.ID, l)
		}
	}
	if ended.Job != j.ID || ended.Submitter != sub.PeerID || ended.GPUs != 1 || ended.Outcome != string(ledger.OutcomeWithdrawn) ||
		ended.Attribution != string(ledger.AttributionSubmitter) || ended.Record != string(ledger.SettlementTwoSided) ||
		ended.HeldFrom.Sub(live.HeldSince).Abs() >= time.Millisecond || !ended.HeldUntil.After(ended.HeldFrom) {
		t.Fatalf("node1's history %+v: want job %s of %s, withdrawn by its submitter, settled two-sided", ended, j.ID, sub.PeerID)
	}
	if out, code := runE31(t, ctx, prov.API, "leases", "--history"); code != 0 || !strings.Contains(out, "withdrawn (submitter)") {
		t.Fatalf("e31 leases --history on node1: exit %d\n%s", code, out)
	} else {
		t.Logf("e31 leases --history on node1:\n%s", out)
	}
	usage := leasesJSON[ledger.UsageReport](t, ctx, prov.API, "usage", "--job", j.ID, "--json")
	if usage.Total.Leases != 1 || usage.Total.GPUHours != ended.Billed.GPUHours || usage.Total.OwedGPUHours != ended.Billed.OwedGPUHours ||
		ended.Billed.GPUHours <= 0 || ended.Billed.OwedGPUHours != ended.Billed.GPUHours {
		t.Fatalf("history billed %+v; node1's usage of the job: %+v", ended.Billed, usage.Total)
	}
	t.Logf("lease %s: held %.6f GPU-h, owed %.6f (usage: %.6f, %.6f)", ended.ID, ended.Billed.GPUHours, ended.Billed.OwedGPUHours,
		usage.Total.GPUHours, usage.Total.OwedGPUHours)
}

// leasesJSON runs an e31 command with --json against the daemon at addr
// and decodes what it printed.
func leasesJSON[T any](t *testing.T, ctx context.Context, addr string, args ...string) T {
	t.Helper()
	var v T
	out, code := runE31(t, ctx, addr, args...)
	if code != 0 {
		t.Fatalf("e31 %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("e31 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}
