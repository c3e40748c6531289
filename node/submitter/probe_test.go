package submitter

import (
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

func TestProbeMismatch(t *testing.T) {
	const gib = 1 << 30
	offer := &market.Offer{GPUs: []market.GPU{
		{UUID: "GPU-a", Model: "H100", MemoryBytes: 80 * gib},
		{UUID: "GPU-b", Model: "H100", MemoryBytes: 80 * gib},
	}}
	leased := []string{"GPU-a", "GPU-b"}
	good := func(u string) wire.ProbedGPU {
		return wire.ProbedGPU{UUID: u, Name: "H100", MemoryBytes: 80 * gib, KernelNs: 30_000, KernelOK: true}
	}
	for _, c := range []struct {
		name string
		gpus []wire.ProbedGPU
		err  string
		want string // "" for a match
	}{
		{name: "match", gpus: []wire.ProbedGPU{good("GPU-a"), good("GPU-b")}},
		{name: "driver's long name", gpus: []wire.ProbedGPU{
			{UUID: "GPU-a", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 * gib, KernelNs: 30_000, KernelOK: true}, good("GPU-b")}},
		{name: "wrong model", gpus: []wire.ProbedGPU{{UUID: "GPU-a", Name: "A100", MemoryBytes: 80 * gib, KernelNs: 30_000, KernelOK: true}, good("GPU-b")},
			want: `GPU-a is a "A100", offered as "H100"`},
		{name: "too little memory", gpus: []wire.ProbedGPU{good("GPU-a"), {UUID: "GPU-b", Name: "H100", MemoryBytes: 40 * gib, KernelNs: 30_000, KernelOK: true}},
			want: "GPU-b has 40GiB of memory"},
		{name: "wrong count", gpus: []wire.ProbedGPU{good("GPU-a")},
			want: "probed 1 GPUs, the lease holds 2; leased GPU-b was not probed"},
		{name: "not leased", gpus: []wire.ProbedGPU{good("GPU-a"), good("GPU-c")},
			want: "probed GPU-c, which is not leased"},
		{name: "too-slow kernel", gpus: []wire.ProbedGPU{good("GPU-a"), {UUID: "GPU-b", Name: "H100", MemoryBytes: 80 * gib, KernelNs: 400_000, KernelOK: true}},
			want: "GPU-b ran the kernel in 400µs, a H100 takes at most 150µs"},
		{name: "wrong output", gpus: []wire.ProbedGPU{good("GPU-a"), {UUID: "GPU-b", Name: "H100", MemoryBytes: 80 * gib, KernelNs: 30_000}},
			want: "GPU-b did not run the probe's kernel right"},
		{name: "probe error", gpus: nil, err: "no NVIDIA driver",
			want: "the probe failed: no NVIDIA driver; probed 0 GPUs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := probeMismatch(wire.ProbeRequest{Lease: "l", Job: "j", GPUs: c.gpus, Error: c.err}, leased, offer, market.Request{})
			switch {
			case c.want == "" && got != "":
				t.Fatalf("a matching probe failed: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Fatalf("got %q, want it to say %q", got, c.want)
			}
		})
	}
}

// TestProbeMismatchNoOffer: with the offer gone from the view, the
// declaration's gpu_model and gpu_memory stand in.
func TestProbeMismatchNoOffer(t *testing.T) {
	req := wire.ProbeRequest{Lease: "l", Job: "j", GPUs: []wire.ProbedGPU{{UUID: "GPU-a", Name: "A100", MemoryBytes: 40 << 30, KernelNs: 50_000, KernelOK: true}}}
	if got := probeMismatch(req, []string{"GPU-a"}, nil, market.Request{}); got != "" {
		t.Fatalf("nothing to compare with, yet: %s", got)
	}
	got := probeMismatch(req, []string{"GPU-a"}, nil, market.Request{GPUModel: "H100"})
	if !strings.Contains(got, `offered as "H100"`) {
		t.Fatalf("declared H100, probed A100: got %q", got)
	}
}
