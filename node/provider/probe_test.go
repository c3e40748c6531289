package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
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

// probeCaller answers the probe as its submitter would, and keeps what
// it was sent.
type probeCaller struct {
	answer error
	sent   []wire.ProbeRequest
}

func (c *probeCaller) Call(_ context.Context, _ peer.ID, proto protocol.ID, req, _ any) error {
	if proto != wire.ProtoProbe {
		return errors.New("not the probe")
	}
	c.sent = append(c.sent, req.(wire.ProbeRequest))
	return c.answer
}

// The run starts once the submitter accepts the probe, and where it cannot
// judge it (a submitter of a version without the protocol); a refusal ends
// the lease failed by the provider, for the probe; a lease of no GPUs
// sends nothing.
func TestLeaseProbe(t *testing.T) {
	refused := &p2p.RemoteError{Code: wire.CodeProbeFailed, Msg: ledger.ReasonGPUProbe + `: GPU-a is a "H100", offered as "B300"`}
	simH100 := []exec.GPU{{UUID: "GPU-a", Model: "H100", MemoryBytes: 80 << 30, Simulated: true}}
	oldSubmitter := errors.New(`open /e31/probe/1 stream: failed to negotiate protocol: protocols not supported: [/e31/probe/1]`)
	for _, c := range []struct {
		name   string
		gpus   []exec.GPU
		answer error
		runs   bool
		sent   int
	}{
		{name: "accepted", gpus: simH100, runs: true, sent: 1},
		{name: "refused", gpus: simH100, answer: refused, runs: false, sent: 1},
		{name: "old submitter", gpus: simH100, answer: oldSubmitter, runs: true, sent: 1},
		{name: "no GPUs", runs: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := &probeCaller{answer: c.answer}
			self := wiretest.FreshParty(t)
			records := &statetest.Records{}
			p := newTestProvider(t, self, Config{}, calls, &unpins{}, records, &ledgertest.Memory{})
			l := releasedLease(t, p, self, time.Now())
			l.rec.State, l.rec.Outcome, l.rec.Attribution = Staging, "", ""
			l.gpus = c.gpus
			if got := l.probe(context.Background()); got != c.runs {
				t.Fatalf("run starts %t, want %t", got, c.runs)
			}
			if len(calls.sent) != c.sent {
				t.Fatalf("%d probes sent, want %d", len(calls.sent), c.sent)
			}
			if c.sent > 0 {
				r := calls.sent[0]
				if r.Lease != l.rec.ID() || r.Job != l.rec.Lease.Terms.Job || len(r.GPUs) != 1 || r.GPUs[0].Name != "H100" || !r.GPUs[0].Simulated {
					t.Fatalf("sent %+v", r)
				}
			}
			rec := l.snapshot()
			if !c.runs && (rec.Outcome != ledger.OutcomeFailed || rec.Attribution != ledger.AttributionProvider || rec.Reason != refused.Msg) {
				t.Fatalf("refused probe ended %s/%s %q, want failed by the provider with the submitter's reason", rec.Outcome, rec.Attribution, rec.Reason)
			}
			if c.runs && rec.Outcome != "" {
				t.Fatalf("a probe that lets the run start ended the lease %s", rec.Outcome)
			}
		})
	}
}
