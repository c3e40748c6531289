package provider

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// TestSimProbe: simulated GPUs answer with their own identity, and their
// family's simulated kernel time, which its bound passes.
func TestSimProbe(t *testing.T) {
	gpus := []exec.GPU{{UUID: "GPU-a", Model: "H100", MemoryBytes: 80 << 30, Simulated: true}}
	r := simProbe(gpus)
	r.Lease, r.Job = "l", "j"
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	g := r.GPUs[0]
	b, _ := gpuprobe.BoundFor("H100")
	if g.UUID != "GPU-a" || g.Name != "H100" || g.MemoryBytes != 80<<30 || !g.KernelOK || !g.Simulated || time.Duration(g.KernelNs) > b.Max {
		t.Fatalf("simulated probe %+v", g)
	}
	if simulated(append(gpus, exec.GPU{UUID: "GPU-b"})) {
		t.Fatal("a real GPU among simulated ones counted as simulated")
	}
}

// TestProbeFromReport: a real probe's report, its error text made fit for
// the wire.
func TestProbeFromReport(t *testing.T) {
	rep := gpuprobe.Report{Devices: []gpuprobe.Device{
		{UUID: "GPU-a", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, KernelOK: true, KernelTook: 20 * time.Microsecond},
		{UUID: "GPU-b", Name: "NVIDIA H100 80GB HBM3", KernelOK: true, Error: "cuMemAlloc_v2: out of memory"},
	}}
	r := fromReport(rep, errors.New("cuModuleLoadDataEx: JIT\nline 2\x1b[2J"+strings.Repeat("x", 400)))
	r.Lease, r.Job = "l", "j"
	if err := r.Check(); err != nil {
		t.Fatalf("report not fit for the wire: %v", err)
	}
	if len(r.GPUs) != 2 || !r.GPUs[0].KernelOK || r.GPUs[1].KernelOK || r.GPUs[0].KernelNs != 20_000 {
		t.Fatalf("got %+v", r.GPUs)
	}
	if !strings.HasPrefix(r.Error, "cuModuleLoadDataEx: JIT line 2") {
		t.Fatalf("error %q", r.Error)
	}
}

func TestProbeReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&p2p.RemoteError{Code: wire.CodeProbeFailed, Msg: ledger.ReasonGPUProbe + ": GPU-a is a \"H100\", offered as \"B300\""}, ledger.ReasonGPUProbe + ": GPU-a is a \"H100\", offered as \"B300\""},
		{&p2p.RemoteError{Code: wire.CodeProbeFailed, Msg: "mismatch"}, ledger.ReasonGPUProbe + ": mismatch"},
	} {
		if got := probeReason(c.err); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
