package gpuprobe

import (
	"testing"
	"time"
)

func TestBoundFor(t *testing.T) {
	for _, c := range []struct {
		model, family string
	}{
		{"NVIDIA H100 80GB HBM3", "H100"},
		{"H100", "H100"},
		{"NVIDIA A100-SXM4-40GB", "A100"},
		{"NVIDIA A10", "A10"},
		{"NVIDIA L4", "L4"},
		{"NVIDIA L40S", "L40S"},
		{"B300", ""},
		{"NVIDIA GeForce RTX 4090", ""},
	} {
		b, ok := BoundFor(c.model)
		if ok != (c.family != "") || b.Family != c.family {
			t.Errorf("%q: family %q (%t), want %q", c.model, b.Family, ok, c.family)
		}
	}
}

// Each family is in the table once, its simulated time inside its bound,
// and a newer family's bound is tighter than an older one's.
func TestKernelBoundsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range KernelBounds() {
		if seen[b.Family] || b.Sim <= 0 || b.Sim >= b.Max {
			t.Errorf("%+v: duplicate, or a simulated time outside its bound", b)
		}
		seen[b.Family] = true
	}
	if got := SimKernelTime("B300"); got != time.Millisecond {
		t.Errorf("a model of no family simulates %s", got)
	}
	h100, _ := BoundFor("H100")
	a100, _ := BoundFor("A100")
	if h100.Max >= a100.Max {
		t.Errorf("an H100's bound %s is no tighter than an A100's %s", h100.Max, a100.Max)
	}
}
