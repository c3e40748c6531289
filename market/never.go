package market

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NeverHeld says why no offer in offers could ever hold a job asking for
// r, however long it waited: each offer lacks, in all it has (free or
// held), the GPU model, the GPU memory, the number of GPUs, the CPUs or
// the memory the job asks for, or a gang (r.Nodes) finds too few offers
// that could. It returns "" where enough offers could, and where offers
// is empty (a node just started has none in view yet). Draining, closed
// and full providers are counted as able: each can change its mind. The
// sentence reads like the reason Match gives a waiting job, "no offer in
// view could ever hold 16 GPUs: the most any has is 8"; a network may
// grow, so a caller warns rather than refuses.
func NeverHeld(r Request, offers []Offer) string {
	if len(offers) == 0 {
		return ""
	}
	nodes := max(r.Nodes, 1)
	counts := map[string]int{}
	able, mostGPUs, mostCPUs := 0, 0, 0
	var cheapest Price // of the offers that could hold it but for its cap
	var mostMem, mostGPUMem uint64
	var models []string
	for i := range offers {
		o := &offers[i]
		gpus := 0
		for _, g := range o.GPUs {
			if !ModelMatches(g.Model, r.GPUModel) {
				continue
			}
			mostGPUMem = max(mostGPUMem, g.MemoryBytes)
			if g.MemoryBytes >= uint64(r.GPUMemory) {
				gpus++
			}
		}
		for _, g := range o.GPUs {
			if !slices.Contains(models, g.Model) {
				models = append(models, g.Model)
			}
		}
		mostGPUs, mostCPUs, mostMem = max(mostGPUs, gpus), max(mostCPUs, o.CPUs), max(mostMem, o.MemoryBytes)
		switch {
		case r.GPUs > 0 && r.GPUModel != "" && !slices.ContainsFunc(o.GPUs, func(g GPU) bool { return ModelMatches(g.Model, r.GPUModel) }):
			counts[ReasonGPUModel]++
		case r.GPUs > 0 && r.GPUMemory > 0 && gpus == 0:
			counts[ReasonGPUMemory]++
		case gpus < r.GPUs:
			counts[ReasonGPUs]++
		case o.CPUs < r.CPUs:
			counts[ReasonCPUs]++
		case o.MemoryBytes < uint64(r.Memory):
			counts[ReasonMemory]++
		case r.GPUs > 0 && r.MaxPrice > 0 && o.Price > r.MaxPrice:
			counts[ReasonPrice]++
			if cheapest == 0 || o.Price < cheapest {
				cheapest = o.Price
			}
		default:
			able++
		}
	}
	if able >= nodes {
		return ""
	}
	n := len(offers)
	switch {
	case able > 0:
		return fmt.Sprintf("the job runs on %d providers at once (request.nodes), and only %d of the %d offers in view could hold a part", nodes, able, n)
	case counts[ReasonGPUModel] == n:
		slices.Sort(models)
		return fmt.Sprintf("no offer in view has gpu_model %s (offered: %s)", r.GPUModel, strings.Join(models, ", "))
	case counts[ReasonGPUModel]+counts[ReasonGPUMemory] == n:
		return fmt.Sprintf("no offer in view has %s with %s or more each: the most any has is %s", gpuNoun(r.GPUModel, 0), r.GPUMemory, Size(mostGPUMem))
	case counts[ReasonGPUs] > 0 && counts[ReasonGPUModel]+counts[ReasonGPUMemory]+counts[ReasonGPUs] == n:
		return fmt.Sprintf("no offer in view could ever hold %d %s: the most any has is %d", r.GPUs, gpuNoun(r.GPUModel, r.GPUs), mostGPUs)
	case counts[ReasonCPUs] == n:
		return fmt.Sprintf("no offer in view could ever hold %d CPUs: the most any has is %d", r.CPUs, mostCPUs)
	case counts[ReasonMemory] == n:
		return fmt.Sprintf("no offer in view could ever hold %s of memory: the most any has is %s", r.Memory, Size(mostMem))
	case counts[ReasonPrice] > 0 && counts[ReasonPrice]+counts[ReasonGPUModel]+counts[ReasonGPUMemory]+counts[ReasonGPUs]+counts[ReasonCPUs]+counts[ReasonMemory] == n:
		return fmt.Sprintf("no offer in view that could hold the job asks request.max_price %s or less: the cheapest asks %s per GPU-hour", r.MaxPrice, cheapest)
	}
	var parts []string
	for _, c := range []struct{ reason, phrase string }{
		{ReasonGPUModel, "without gpu_model " + r.GPUModel},
		{ReasonGPUMemory, "without GPUs of " + r.GPUMemory.String()},
		{ReasonGPUs, "with too few GPUs"},
		{ReasonCPUs, "with too few CPUs"},
		{ReasonMemory, "with too little memory"},
	} {
		if k := counts[c.reason]; k > 0 {
			parts = append(parts, strconv.Itoa(k)+" "+c.phrase)
		}
	}
	return fmt.Sprintf("no offer in view could ever hold the job (%s)", strings.Join(parts, ", "))
}
