package market

import "testing"

// NeverHeld names why no offer in view could ever hold a request, by the
// one thing every offer lacks, and says nothing where one could, busy or
// not, or where none is in view yet.
func TestNeverHeld(t *testing.T) {
	h100 := func(n int) []GPU {
		gs := make([]GPU, n)
		for i := range gs {
			gs[i] = GPU{Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30}
		}
		return gs
	}
	offers := []Offer{
		{Provider: "a", GPUs: h100(8), CPUs: 64, MemoryBytes: 512 << 30, Price: 2_400_000},
		{Provider: "b", GPUs: []GPU{{Model: "NVIDIA L4", MemoryBytes: 24 << 30}}, CPUs: 8, MemoryBytes: 32 << 30, Draining: true, Price: 2_500_000},
	}
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"fits", Request{GPUs: 8, GPUModel: "H100", CPUs: 8, Memory: 64 << 30}, ""},
		{"fits a draining one", Request{GPUs: 1, GPUModel: "L4"}, ""},
		{"cpu job", Request{CPUs: 4, Memory: 1 << 30}, ""},
		{"model", Request{GPUs: 1, GPUModel: "H200"}, "no offer in view has gpu_model H200 (offered: NVIDIA H100 80GB HBM3, NVIDIA L4)"},
		{"count", Request{GPUs: 16}, "no offer in view could ever hold 16 GPUs: the most any has is 8"},
		{"count of a model", Request{GPUs: 9, GPUModel: "H100"}, "no offer in view could ever hold 9 H100 GPUs: the most any has is 8"},
		{"gpu memory", Request{GPUs: 1, GPUMemory: 141 << 30}, "no offer in view has GPUs with 141GiB or more each: the most any has is 80GiB"},
		{"cpus", Request{CPUs: 128}, "no offer in view could ever hold 128 CPUs: the most any has is 64"},
		{"memory", Request{CPUs: 1, Memory: 1 << 40}, "no offer in view could ever hold 1TiB of memory: the most any has is 512GiB"},
		{"few of a model", Request{GPUs: 2, GPUModel: "L4"}, "no offer in view could ever hold 2 L4 GPUs: the most any has is 1"},
		{"mixed", Request{GPUs: 1, GPUModel: "L4", CPUs: 16}, "no offer in view could ever hold the job (1 without gpu_model L4, 1 with too few CPUs)"},
		{"gang", Request{GPUs: 8, Nodes: 2}, "the job runs on 2 providers at once (request.nodes), and only 1 of the 2 offers in view could hold a part"},
		{"under its cap", Request{GPUs: 1, MaxPrice: 3 * PriceUnit}, ""},
		{"over its cap", Request{GPUs: 1, MaxPrice: PriceUnit}, "no offer in view that could hold the job asks request.max_price 1.00 or less: the cheapest asks 2.40 per GPU-hour"},
		{"cpu job under a cap", Request{CPUs: 1, MaxPrice: 1}, ""},
	} {
		if got := NeverHeld(tc.r, offers); got != tc.want {
			t.Errorf("%s: %q\nwant %q", tc.name, got, tc.want)
		}
	}
	if got := NeverHeld(Request{GPUs: 99}, nil); got != "" {
		t.Errorf("no offer in view yet: %q, want nothing said", got)
	}
}
