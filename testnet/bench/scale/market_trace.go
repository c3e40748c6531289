package scale

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/e31network/e31/market"
)

// MarketOptions size the market simulation (RunMarket): the trace's
// network and load, and how long it is simulated.
type MarketOptions struct {
	// Providers is the network's size. Default 2000; the figure is
	// for 10000.
	Providers int
	// Load is the GPU-hours asked per GPU-hour offered, in each pool of
	// boxes (consumer cards, H100, A100, H200, B200), 0.5 to 0.9. Default
	// 0.75.
	Load float64
	// Hours is how long jobs that count arrive, after the warm-up. Default 3.
	Hours float64
	// WarmUp is how long jobs arrive before the ones counted, so that the
	// markets are as full as they stay. Default 1h.
	WarmUp time.Duration
	// Drain is how long the simulation goes on after the last counted
	// arrival (jobs still arrive), so that counted jobs that wait get the
	// time to be placed. Default 1h.
	Drain time.Duration
	// Submitters is how many submitters the jobs come from, drawn by Zipf
	// (s 1.1): a few submit most. Default 1000.
	Submitters int
	// Seed makes the trace and every random draw; the same seed gives the
	// same report. Default 1.
	Seed uint64
}

func (o MarketOptions) withDefaults() MarketOptions {
	o.Providers = cmp.Or(o.Providers, 2000)
	o.Load = cmp.Or(o.Load, 0.75)
	o.Hours = cmp.Or(o.Hours, 3)
	o.WarmUp = cmp.Or(o.WarmUp, time.Hour)
	o.Drain = cmp.Or(o.Drain, time.Hour)
	o.Submitters = cmp.Or(o.Submitters, 1000)
	o.Seed = cmp.Or(o.Seed, 1)
	return o
}

func (o MarketOptions) check() error {
	switch {
	case o.Providers < 10 || o.Providers > 100000:
		return fmt.Errorf("market simulation: --providers %d: want 10 to 100000", o.Providers)
	case o.Load < 0.5 || o.Load > 0.9:
		return fmt.Errorf("market simulation: --load %g: want 0.5 to 0.9", o.Load)
	case o.Hours <= 0 || o.Hours > 48:
		return fmt.Errorf("market simulation: --hours %g: want more than 0, at most 48", o.Hours)
	case o.Submitters < 1:
		return fmt.Errorf("market simulation: %d submitters: want at least 1", o.Submitters)
	}
	return nil
}

// Trace is what the simulation replays in each design: the providers'
// offers and the declarations, in order of arrival.
type Trace struct {
	Offers []market.Offer
	Jobs   []TraceJob
	// MeasureFrom and MeasureTo bound the arrivals that are counted; End
	// is when the simulation stops.
	MeasureFrom, MeasureTo, End time.Duration
}

// TraceJob is one declaration: a job, a gang (Request.Nodes parts) or an
// array (Tasks tasks of Request each).
type TraceJob struct {
	// Kind is the class of job the declaration was designed for, which
	// the report groups by ("H100x8", "gang", "any", ...).
	Kind      string
	Submitter string
	At        time.Duration // since the trace's start
	Run       time.Duration // how long each job holds its GPUs
	Request   market.Request
	Tasks     int // an array's tasks; 0 or 1: no array
	Data      []market.Datum
}

// The GPUs of the trace's boxes.
const (
	modelConsumer = "NVIDIA GeForce RTX 4090"
	modelH100     = "NVIDIA H100 80GB HBM3"
	modelA100     = "NVIDIA A100 80GB PCIe"
	modelH200     = "NVIDIA H200"
	modelB200     = "NVIDIA B200"
)

// boxKind is one kind of provider in the mix.
type boxKind struct {
	model string
	mem   uint64 // per GPU
	gpus  int
	share float64 // of the providers; the consumer cards take the rest
	pool  string
}

// boxMix is the network: 60% one-GPU consumer cards (59.5%, the
// rest: consumerBox), 30% A100/H100 boxes of 1, 4 and 8 GPUs, 10% 8×H200
// and 0.5% of a rare 8×B200, the last.
func boxMix() []boxKind {
	return []boxKind{
		{model: modelH100, mem: 80 << 30, gpus: 8, share: 0.12, pool: "H100"},
		{model: modelH100, mem: 80 << 30, gpus: 4, share: 0.06, pool: "H100"},
		{model: modelH100, mem: 80 << 30, gpus: 1, share: 0.03, pool: "H100"},
		{model: modelA100, mem: 80 << 30, gpus: 8, share: 0.045, pool: "A100"},
		{model: modelA100, mem: 80 << 30, gpus: 4, share: 0.03, pool: "A100"},
		{model: modelA100, mem: 80 << 30, gpus: 1, share: 0.015, pool: "A100"},
		{model: modelH200, mem: 141 << 30, gpus: 8, share: 0.10, pool: "H200"},
		{model: modelB200, mem: 180 << 30, gpus: 8, share: 0.005, pool: "B200"},
	}
}

// consumerBox is a one-GPU consumer card's box.
func consumerBox() boxKind {
	return boxKind{model: modelConsumer, mem: 24 << 30, gpus: 1, pool: "consumer"}
}

// jobKind is one kind of declaration in the mix: share of its pool's
// GPU-hours, and the request it makes.
type jobKind struct {
	kind  string
	pool  string
	share float64
	// gpus are the per-node GPU counts drawn from, alike.
	gpus  []int
	model string // request.gpu_model
	nodes int
	tasks int
	data  bool
}

// jobMix is what the jobs ask for, by pool: each pool's jobs ask for
// Load of its GPU-hours. Jobs that take any GPU ("any") are counted
// against the consumer pool, though they may run anywhere.
func jobMix() []jobKind {
	return []jobKind{
		{kind: "consumer-24G", pool: "consumer", share: 0.45, gpus: []int{1}, model: "RTX 4090"},
		{kind: "array", pool: "consumer", share: 0.20, gpus: []int{1}, model: "RTX 4090", tasks: 10},
		{kind: "data", pool: "consumer", share: 0.15, gpus: []int{1}, model: "RTX 4090", data: true},
		{kind: "any", pool: "consumer", share: 0.20, gpus: []int{1}},
		{kind: "H100x8", pool: "H100", share: 0.50, gpus: []int{8}, model: "H100"},
		{kind: "H100x1-4", pool: "H100", share: 0.30, gpus: []int{1, 4}, model: "H100"},
		{kind: "gang", pool: "H100", share: 0.20, gpus: []int{8}, model: "H100", nodes: 8},
		{kind: "A100", pool: "A100", share: 1, gpus: []int{1, 4, 8}, model: "A100"},
		{kind: "H200x8", pool: "H200", share: 1, gpus: []int{8}, model: "H200"},
		{kind: "B200x8", pool: "B200", share: 1, gpus: []int{8}, model: "B200"},
	}
}

// Every job runs for jobRun, fixed, and declares it as its limit.
const jobRun = time.Hour

// Data: each dataset is held by dataHolders consumer providers, one per
// 200 providers of the network.
const (
	dataHolders = 10
	dataBytes   = 100 << 30
)

// NewTrace makes the seeded trace of o: the providers of the mix, and
// Poisson arrivals of each kind of job at Load of its pool, from o.Submitters
// submitters by Zipf.
func NewTrace(o MarketOptions) Trace {
	o = o.withDefaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x7472616365)) // "trace"
	tr := Trace{
		MeasureFrom: o.WarmUp,
		MeasureTo:   o.WarmUp + time.Duration(o.Hours*float64(time.Hour)),
	}
	tr.End = tr.MeasureTo + o.Drain

	// Providers: the rare kinds by count, the consumer cards the rest.
	var kinds []boxKind
	rest := o.Providers
	for _, k := range boxMix() {
		n := int(math.Round(k.share * float64(o.Providers)))
		rest -= n
		for range n {
			kinds = append(kinds, k)
		}
	}
	for range rest {
		kinds = append(kinds, consumerBox())
	}
	poolGPUs := map[string]int{}
	var consumers []int
	for i, k := range kinds {
		tr.Offers = append(tr.Offers, simOffer(fmt.Sprintf("p%06d", i), k))
		poolGPUs[k.pool] += k.gpus
		if k.pool == "consumer" {
			consumers = append(consumers, i)
		}
	}

	// Datasets, each held by dataHolders consumer providers.
	datasets := max(o.Providers/200, 1)
	for d := range datasets {
		root := datasetRoot(d)
		for range dataHolders {
			p := &tr.Offers[consumers[rng.IntN(len(consumers))]]
			held := append(slices.Clone(p.Holdings.Roots), market.Datum{Root: root, Size: dataBytes})
			p.Holdings = market.NewHoldings(held)
		}
	}

	zipf := rand.NewZipf(rng, 1.1, 1, uint64(o.Submitters-1))
	for _, k := range jobMix() {
		gpus := 0.0
		for _, g := range k.gpus {
			gpus += float64(g)
		}
		perDecl := gpus / float64(len(k.gpus)) * float64(max(k.nodes, 1)) * float64(max(k.tasks, 1))
		// Declarations an hour that ask share × Load of the pool's GPUs.
		rate := k.share * o.Load * float64(poolGPUs[k.pool]) / perDecl / jobRun.Hours()
		if rate <= 0 {
			continue
		}
		for at := 0.0; ; {
			at += rng.ExpFloat64() / rate
			if at >= tr.End.Hours() {
				break
			}
			g := k.gpus[rng.IntN(len(k.gpus))]
			j := TraceJob{
				Kind:      k.kind,
				Submitter: fmt.Sprintf("s%05d", zipf.Uint64()),
				At:        time.Duration(at * float64(time.Hour)),
				Run:       jobRun,
				Request: market.Request{
					GPUs: g, GPUModel: k.model, CPUs: 4 * g, Memory: market.Size(16 * g * market.GiB),
					Limit: market.Duration(jobRun.Milliseconds()), Nodes: k.nodes,
				},
				Tasks: k.tasks,
			}
			if k.data {
				j.Data = []market.Datum{{Root: datasetRoot(rng.IntN(datasets)), Size: dataBytes}}
			}
			tr.Jobs = append(tr.Jobs, j)
		}
	}
	slices.SortStableFunc(tr.Jobs, func(a, b TraceJob) int { return cmp.Compare(a.At, b.At) })
	return tr
}

// simOffer is the offer of a box of kind k: every device listed free, as
// a provider lists it; the leases in the view hold the busy ones.
func simOffer(id string, k boxKind) market.Offer {
	o := market.Offer{Provider: id, CPUs: 16 * k.gpus, MemoryBytes: uint64(k.gpus) * 128 << 30}
	for g := range k.gpus {
		o.GPUs = append(o.GPUs, market.GPU{
			Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Model: k.model, MemoryBytes: k.mem, Free: true,
		})
	}
	return o
}

func datasetRoot(d int) string { return fmt.Sprintf("bafydataset%04d", d) }
