package wire_test

import (
	"strings"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// FuzzProbeRequest feeds the probe result's decoder what a hostile
// provider could send: whatever Check accepts is within bounds, and
// nothing panics.
func FuzzProbeRequest(f *testing.F) {
	f.Add([]byte(`{"lease":"l1","job":"j1","gpus":[{"uuid":"GPU-1","name":"H100","memory_bytes":85899345920,"kernel_ns":30000,"kernel_ok":true,"simulated":true}]}`))
	f.Add([]byte(`{"lease":"l1","job":"j1","gpus":[],"error":"no NVIDIA driver"}`))
	f.Add([]byte(`{"lease":"l1","job":"j1","gpus":[{"uuid":"","name":"x","kernel_ns":-1}]}`))
	f.Add([]byte(`{"lease":"l1","job":"j1","gpus":[{"uuid":"GPU-\u001b[2J","name":"H100"}]}`))
	f.Add([]byte(`{"lease":"l1","job":"j1","gpus":null,"extra":1}`))
	f.Add([]byte(`{"lease":"","job":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r wire.ProbeRequest
		if p2p.DecodeStrict(b, &r) != nil || r.Check() != nil {
			return
		}
		if len(r.GPUs) > wire.MaxProbeGPUs || r.Lease == "" || r.Job == "" {
			t.Fatalf("accepted %q", b)
		}
		for _, g := range r.GPUs {
			if g.UUID == "" || g.KernelNs < 0 || len(g.Name) > wire.MaxStringLen || strings.ContainsAny(g.UUID+g.Name, "\x00\x1b\n") {
				t.Fatalf("accepted GPU %+v", g)
			}
		}
	})
}

func TestProbeRequestCheck(t *testing.T) {
	ok := wire.ProbeRequest{Lease: "l", Job: "j", GPUs: []wire.ProbedGPU{{UUID: "GPU-1", Name: "H100", KernelNs: 1}}}
	if err := ok.Check(); err != nil {
		t.Fatalf("well-formed result refused: %v", err)
	}
	for name, r := range map[string]wire.ProbeRequest{
		"no lease":     {Job: "j"},
		"no uuid":      {Lease: "l", Job: "j", GPUs: []wire.ProbedGPU{{Name: "H100"}}},
		"escape":       {Lease: "l", Job: "j", GPUs: []wire.ProbedGPU{{UUID: "GPU-1", Name: "H1\x1b[2J"}}},
		"negative":     {Lease: "l", Job: "j", GPUs: []wire.ProbedGPU{{UUID: "GPU-1", KernelNs: -5}}},
		"too many":     {Lease: "l", Job: "j", GPUs: make([]wire.ProbedGPU, wire.MaxProbeGPUs+1)},
		"long a error": {Lease: "l", Job: "j", Error: strings.Repeat("e", wire.MaxStringLen+1)},
	} {
		if err := r.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
