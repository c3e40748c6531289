package submitter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// gpuMismatch compares the GPUs a final receipt says the run saw with the
// lease's GPUs, the model the provider offered them as (the receipt's
// GPUModel) and the declared gpu_model, and says how they differ, or ""
// when they agree. A receipt of a run that used GPUs but names none is a
// mismatch too: a provider cannot hide what it ran on by leaving the field
// out. A lease whose run never started has nothing to compare.
func gpuMismatch(fin ledger.Receipt, leased []string, model string) string {
	if len(leased) == 0 {
		return ""
	}
	if len(fin.GPUsSeen) == 0 {
		if fin.Phases.Run == 0 {
			return ""
		}
		return "the provider recorded no GPUs seen by the run"
	}
	var problems []string
	seen := make([]string, len(fin.GPUsSeen))
	for i, g := range fin.GPUsSeen {
		seen[i] = g.UUID
		if !slices.Contains(leased, g.UUID) {
			problems = append(problems, fmt.Sprintf("saw %s, which is not leased", g.UUID))
		}
		switch {
		case !market.ModelMatches(g.Model, model):
			problems = append(problems, fmt.Sprintf("saw %s as %q, not gpu_model %s", g.UUID, g.Model, model))
		case fin.GPUModel != "" && g.Model != fin.GPUModel:
			problems = append(problems, fmt.Sprintf("saw %s as %q, offered as %q", g.UUID, g.Model, fin.GPUModel))
		}
	}
	for _, u := range leased {
		if !slices.Contains(seen, u) {
			problems = append(problems, fmt.Sprintf("did not see leased %s", u))
		}
	}
	return strings.Join(problems, "; ")
}
