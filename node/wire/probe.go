package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/protocol"
)

// ProtoProbe: provider → submitter, the GPU probe's result on the leased
// GPUs, before the run. The reply is an empty acceptance, or a refusal
// with CodeProbeFailed whose text is the lease's ending reason. A
// submitter of a version without the protocol refuses the stream itself,
// and the provider runs the job as before.
const ProtoProbe protocol.ID = "/e31/probe/1"

// CodeProbeFailed: the submitter refuses a probe result that does not
// match the offer the lease was made on; the provider ends the lease
// failed, its own doing, with the refusal's text as the reason
// (ledger.ReasonGPUProbe).
const CodeProbeFailed = "probe-failed"

// MaxProbeGPUs bounds a probe result: no lease holds more GPUs than a
// declaration may ask for.
const MaxProbeGPUs = 64

// ProbeRequest is what the probe found on each leased GPU (ProtoProbe).
type ProbeRequest struct {
	Lease string      `json:"lease"`
	Job   string      `json:"job"`
	GPUs  []ProbedGPU `json:"gpus"`
	// Error is the probe's own failure (no driver in the sandbox, a
	// device that failed), when it had one.
	Error string `json:"error,omitempty"`
}

// ProbedGPU is one GPU as the probe saw it from inside the sandbox.
type ProbedGPU struct {
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// KernelNs is the probe kernel's time on the device, launch to
	// synchronisation, in nanoseconds (gpuprobe.KernelBounds).
	KernelNs int64 `json:"kernel_ns"`
	// KernelOK says every element of the kernel's output was right.
	KernelOK bool `json:"kernel_ok"`
	// Simulated says the GPU is simulated (--sim-gpus): its name, memory
	// and kernel time are the simulation's.
	Simulated bool `json:"simulated,omitempty"`
}

// Check bounds a probe result from a peer: names and IDs of printable
// text within MaxStringLen, at most MaxProbeGPUs GPUs, no negative time.
func (r ProbeRequest) Check() error {
	if r.Lease == "" || r.Job == "" {
		return errors.New("probe: lease and job are required")
	}
	if len(r.GPUs) > MaxProbeGPUs {
		return fmt.Errorf("probe: %d GPUs, at most %d", len(r.GPUs), MaxProbeGPUs)
	}
	for _, s := range []string{r.Lease, r.Job, r.Error} {
		if !printable(s) {
			return errors.New("probe: lease, job and error must be printable text of at most 256 bytes")
		}
	}
	for i, g := range r.GPUs {
		if g.UUID == "" || !printable(g.UUID) || !printable(g.Name) {
			return fmt.Errorf("probe: gpus[%d]: want a UUID and a name of printable text, at most %d bytes each", i, MaxStringLen)
		}
		if g.KernelNs < 0 {
			return fmt.Errorf("probe: gpus[%d]: negative kernel time", i)
		}
	}
	return nil
}

func printable(s string) bool {
	return len(s) <= MaxStringLen && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}
