package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
)

func TestGPUsSeenShown(t *testing.T) {
	var out bytes.Buffer
	g := &globalOptions{stdout: &out, stderr: &out}
	printReceipts(g, receiptsResult{Receipts: []ledger.Receipt{
		{Lease: "l1", Job: "j1", Seq: 0},
		{Lease: "l1", Job: "j1", Seq: 1, Final: true, GPUModel: "H100", GPUsSeen: []ledger.GPUSeen{{UUID: "GPU-a", Model: "NVIDIA A10"}}},
	}})
	if s := out.String(); !strings.Contains(s, "gpus seen by the run") || !strings.Contains(s, "GPU-a  NVIDIA A10  H100") {
		t.Fatalf("receipts:\n%s", s)
	}

	out.Reset()
	printJob(g, api.Job{ID: "j1", Provider: "p", GPUs: []string{"GPU-a"},
		GPUsSeen: []api.GPUSeen{{UUID: "GPU-a", Model: "NVIDIA A10"}}, GPUMismatch: `saw GPU-a as "NVIDIA A10", not gpu_model H100`})
	if s := out.String(); !strings.Contains(s, "gpu seen by the run  GPU-a (NVIDIA A10)") || !strings.Contains(s, "GPU MISMATCH") {
		t.Fatalf("status:\n%s", s)
	}
}
