package market

import (
	"testing"

	"pgregory.net/rapid"
)

func gpusOf(model string, n int, gib uint64) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = GPU{Index: i, Model: model, MemoryBytes: gib << 30}
	}
	return out
}

func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		gpus []GPU
		want Class
	}{
		{nil, ClassCPU},
		{gpusOf("NVIDIA H100 80GB HBM3", 8, 80), "H100x8"},
		{gpusOf("NVIDIA H100 80GB HBM3", 1, 80), "H100x1-4"},
		{gpusOf("H100", 4, 80), "H100x1-4"},
		{gpusOf("NVIDIA A100-SXM4-40GB", 6, 40), "A100x5-7"},
		{gpusOf("NVIDIA H200", 16, 141), "H200x9+"},
		{gpusOf("NVIDIA GeForce RTX 4090", 1, 24), "consumer-24G"},
		{gpusOf("RTX4090", 2, 24), "consumer-24G"},
		{gpusOf("NVIDIA GeForce RTX 3060", 1, 12), "consumer-12G"},
		{gpusOf("NVIDIA RTX A6000", 2, 48), "A6000x1-4"},
		{gpusOf("NVIDIA RTX 6000 Ada Generation", 4, 48), "RTXx1-4"},
		{gpusOf("Tesla V100-SXM2-32GB", 8, 32), "V100x8"},
		{gpusOf("AMD Instinct MI300X", 8, 192), "MI300Xx8"},
		{append(gpusOf("NVIDIA A100", 1, 80), gpusOf("NVIDIA H100", 2, 80)...), "H100x1-4"},
	} {
		if got := ClassOf(c.gpus); got != c.want {
			t.Errorf("ClassOf(%d × %q) = %q, want %q", len(c.gpus), c.gpus[0].Model, got, c.want)
		}
	}
}

func TestClassFits(t *testing.T) {
	for _, c := range []struct {
		class Class
		r     Request
		want  bool
	}{
		{"H100x8", Request{GPUs: 8}, true},
		{"H100x8", Request{GPUs: 8, GPUModel: "H100"}, true},
		{"H100x8", Request{GPUs: 8, GPUModel: "NVIDIA H100 80GB HBM3"}, true},
		{"H100x8", Request{GPUs: 1, GPUModel: "A100"}, false},
		{"H100x1-4", Request{GPUs: 8}, false},
		{"H100x1-4", Request{GPUs: 4}, true},
		{"cpu", Request{GPUs: 1}, false},
		{"cpu", Request{}, true},
		{"H100x8", Request{}, true},
		{"consumer-24G", Request{GPUs: 1, GPUMemory: 24 << 30}, true},
		{"consumer-12G", Request{GPUs: 1, GPUMemory: 24 << 30}, false},
		{"consumer-24G", Request{GPUs: 1, GPUModel: "H100"}, false},
		{"consumer-24G", Request{GPUs: 1, GPUModel: "RTX 4090"}, true},
		{"bogus", Request{}, false},
	} {
		if got := c.class.Fits(c.r); got != c.want {
			t.Errorf("%q.Fits(%+v) = %v, want %v", c.class, c.r, got, c.want)
		}
	}
}

// TestClassOfParses: every class ClassOf derives parses back, and a box
// fits the class it is of for a request of all its GPUs of its model.
func TestClassOfParses(t *testing.T) {
	models := []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "RTX4090", "NVIDIA L4", "Tesla T4", "AMD Instinct MI300X", "", "X", "weird model name 9000"}
	rapid.Check(t, func(t *rapid.T) {
		model := rapid.SampledFrom(models).Draw(t, "model")
		n := rapid.IntRange(1, 16).Draw(t, "n")
		gib := rapid.SampledFrom([]uint64{8, 12, 16, 24, 40, 80, 141}).Draw(t, "gib")
		c := ClassOf(gpusOf(model, n, gib))
		if _, err := ParseClass(string(c)); err != nil {
			t.Fatalf("ClassOf gave %q, which does not parse: %v", c, err)
		}
		if !c.Fits(Request{GPUs: n, GPUModel: model, GPUMemory: Size(gib << 30)}) && model != "" && !consumerModel(model) {
			t.Fatalf("%d × %q (%q) does not fit its own box", n, model, c)
		}
	})
}

func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"cpu", "H100x8", "H100x1-4", "consumer-24G", "consumer-7G", "x8", "H100x3", "", "H100x9+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseClass(s)
		if err != nil {
			return
		}
		if len(c) > MaxClassLen || c.Fits(Request{GPUs: 1}) && c.MaxBoxGPUs() < 1 {
			t.Fatalf("ParseClass(%q) accepted an invalid class", s)
		}
	})
}
