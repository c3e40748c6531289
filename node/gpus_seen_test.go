package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/poll"
)

const h100Job = `name: t
work: {command: ["sh", "-c", "echo hi"]}
request: {gpus: 1, gpu_model: H100, cpus: 1, memory: 1GiB, limit: 1h}
output: {path: /out}
`

// gpusSeenPair is a provider offering one simulated H100 whose check
// before the run reports its GPUs as see makes them, and a submitter.
func gpusSeenPair(t *testing.T, see func([]exec.GPU) []exec.GPU) (prov, sub *testNode) {
	t.Helper()
	var n *testNode
	prov = startNode(t, nodeOpts{gpus: "1xH100:80GiB", runner: newFakeRunner(true), seeGPUs: func(context.Context) []exec.GPU {
		return see(n.compute.GPUs)
	}})
	n = prov
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub = startNode(t, nodeOpts{boot: prov.Addrs()[:1]})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })
	return prov, sub
}

// runH100Job runs h100Job to its end and returns the job and the final
// receipt both ledgers hold.
func runH100Job(t *testing.T, prov, sub *testNode) (api.Job, ledger.Receipt) {
	t.Helper()
	j, err := sub.submitter.Submit(context.Background(), api.SubmitRequest{Declaration: []byte(h100Job)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := waitState(t, sub, j.ID, api.JobReleased, 30*time.Second)
	poll.Until(t, "the provider's final receipt", 10*time.Second, func() bool { _, ok := finalReceipt(t, prov, done.Lease); return ok })
	pr, _ := finalReceipt(t, prov, done.Lease)
	sr, ok := finalReceipt(t, sub, done.Lease)
	if !ok || pr.Digest() != sr.Digest() {
		t.Fatal("the two ledgers end the lease differently")
	}
	verifyLedger(t, prov)
	verifyLedger(t, sub)
	return done, sr
}

func TestRolesGPUsSeenAgree(t *testing.T) {
	prov, sub := gpusSeenPair(t, func(gs []exec.GPU) []exec.GPU { return gs })
	j, r := runH100Job(t, prov, sub)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("ended %s: %s", j.Outcome, j.Reason)
	}
	want := prov.compute.GPUs[0]
	if len(r.GPUsSeen) != 1 || r.GPUsSeen[0] != (ledger.GPUSeen{UUID: want.UUID, Model: want.Model}) {
		t.Fatalf("final receipt saw %+v, leased %s %s", r.GPUsSeen, want.UUID, want.Model)
	}
	if len(j.GPUsSeen) != 1 || j.GPUsSeen[0].UUID != want.UUID || j.GPUMismatch != "" {
		t.Fatalf("status: seen %+v, mismatch %q", j.GPUsSeen, j.GPUMismatch)
	}
}

// A provider whose offer says H100 but whose sandbox finds an A10: the
// job still completes and is paid for, but its final receipt, signed by
// both, proves what it ran on, and the submitter's status says so.
func TestRolesGPUsSeenDifferFromOffer(t *testing.T) {
	prov, sub := gpusSeenPair(t, func(gs []exec.GPU) []exec.GPU {
		out := make([]exec.GPU, len(gs))
		for i, g := range gs {
			g.Model = "NVIDIA A10"
			out[i] = g
		}
		return out
	})
	j, r := runH100Job(t, prov, sub)
	if len(r.GPUsSeen) != 1 || r.GPUsSeen[0].Model != "NVIDIA A10" || r.GPUModel != "H100" {
		t.Fatalf("final receipt: offered %q, saw %+v", r.GPUModel, r.GPUsSeen)
	}
	if !strings.Contains(j.GPUMismatch, `as "NVIDIA A10", not gpu_model H100`) {
		t.Fatalf("status mismatch %q", j.GPUMismatch)
	}
	// Read again: it is kept in the job's record, not only reported once.
	again := job(t, sub, j.ID)
	if again.GPUMismatch != j.GPUMismatch {
		t.Fatalf("mismatch not kept: %q", again.GPUMismatch)
	}
}
