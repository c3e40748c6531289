package submitter

import (
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
)

func TestGPUMismatch(t *testing.T) {
	h100 := ledger.GPUSeen{UUID: "GPU-a", Model: "NVIDIA H100 80GB HBM3"}
	ran := ledger.Phases{Run: 1}
	for _, c := range []struct {
		name   string
		fin    ledger.Receipt
		leased []string
		model  string
		want   string // "" or a part of the answer
	}{
		{"agree", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{h100}, Phases: ran}, []string{"GPU-a"}, "H100", ""},
		{"agree without a model", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{h100}, GPUModel: h100.Model, Phases: ran}, []string{"GPU-a"}, "", ""},
		{"no GPUs leased", ledger.Receipt{Phases: ran}, nil, "", ""},
		{"never ran", ledger.Receipt{}, []string{"GPU-a"}, "H100", ""},
		{"ran, none named", ledger.Receipt{Phases: ran}, []string{"GPU-a"}, "", "recorded no GPUs"},
		{"other model", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{{UUID: "GPU-a", Model: "NVIDIA A10"}}, Phases: ran}, []string{"GPU-a"}, "H100", `as "NVIDIA A10", not gpu_model H100`},
		{"offered as another", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{{UUID: "GPU-a", Model: "NVIDIA A10"}}, GPUModel: "H100", Phases: ran}, []string{"GPU-a"}, "", `offered as "H100"`},
		{"other GPU", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{{UUID: "GPU-b", Model: h100.Model}}, Phases: ran}, []string{"GPU-a"}, "H100", "saw GPU-b, which is not leased"},
		{"one missing", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{h100}, Phases: ran}, []string{"GPU-a", "GPU-c"}, "H100", "did not see leased GPU-c"},
		{"H1000 is not H100", ledger.Receipt{GPUsSeen: []ledger.GPUSeen{{UUID: "GPU-a", Model: "H1000"}}, Phases: ran}, []string{"GPU-a"}, "H100", "not gpu_model H100"},
	} {
		got := gpuMismatch(c.fin, c.leased, c.model)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
