package gpuprobe

import (
	"strings"
	"time"
)

// KernelBound is how long the probe's kernel (elements floats, one pass)
// may take on one GPU of a family, from launch to synchronisation, for the
// GPU to pass for a member of it. The kernel is small, so its time is
// mostly launch and memory latency; the bound is set above what a card of
// the family takes under load and below what the generation before it
// takes, so that an older card cannot pass for a newer one. Sim is the
// time a simulated GPU of the family reports: well inside the bound.
type KernelBound struct {
	// Family is the word the driver's product name carries ("H100" in
	// "NVIDIA H100 80GB HBM3"), matched as a whole word, ignoring case.
	Family string
	Max    time.Duration
	Sim    time.Duration
}

// KernelBounds is the one table of kernel-time bounds, newest families
// first, a fresh copy on each call. A model of no family here has no
// timing bound: its probe is judged on name, memory and count alone.
func KernelBounds() []KernelBound {
	return []KernelBound{
		{Family: "B200", Max: 120 * time.Microsecond, Sim: 20 * time.Microsecond},
		{Family: "H200", Max: 150 * time.Microsecond, Sim: 25 * time.Microsecond},
		{Family: "H100", Max: 150 * time.Microsecond, Sim: 30 * time.Microsecond},
		{Family: "A100", Max: 300 * time.Microsecond, Sim: 50 * time.Microsecond},
		{Family: "L40S", Max: 300 * time.Microsecond, Sim: 60 * time.Microsecond},
		{Family: "A10", Max: 500 * time.Microsecond, Sim: 80 * time.Microsecond},
		{Family: "L4", Max: 600 * time.Microsecond, Sim: 90 * time.Microsecond},
		{Family: "T4", Max: 1000 * time.Microsecond, Sim: 150 * time.Microsecond},
	}
}

// BoundFor is the bound of model's family, and false when the table has
// none.
func BoundFor(model string) (KernelBound, bool) {
	for _, b := range KernelBounds() {
		if hasWord(strings.ToLower(model), strings.ToLower(b.Family)) {
			return b, true
		}
	}
	return KernelBound{}, false
}

// SimKernelTime is the kernel time a simulated GPU of model reports: its
// family's Sim, or a millisecond for a model of no family.
func SimKernelTime(model string) time.Duration {
	if b, ok := BoundFor(model); ok {
		return b.Sim
	}
	return time.Millisecond
}

// hasWord reports whether w is s or a whole word of it: letters and digits
// on neither side ("A10" is not in "A100").
func hasWord(s, w string) bool {
	for i := 0; w != "" && i+len(w) <= len(s); {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if (start == 0 || !alnum(s[start-1])) && (end == len(s) || !alnum(s[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
