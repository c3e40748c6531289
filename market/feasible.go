package market

import (
	"slices"
	"strconv"
	"strings"
)

// Reasons an offer is filtered out for a job, the keys of Wait.Counts. Each
// offer is counted under the first filter it fails, in this order.
const (
	ReasonUnreachable = "unreachable"   // no peer can reach the provider (behind a NAT, no relay)
	ReasonDraining    = "draining"      // the provider takes no new work (its owner drains it)
	ReasonClosed      = "closed"        // the provider is outside its contribution hours
	ReasonNoDisk      = "no_disk"       // the provider lends no disk now (Offer.NoDisk)
	ReasonNoImages    = "images"        // the job brings an image the provider cannot run
	ReasonNeedImage   = "require_image" // the provider takes only jobs with an image
	ReasonCPUJobs     = "cpu_jobs"      // the job asks for no GPU, and the provider takes only jobs that do
	ReasonDisk        = "disk"          // request.disk is above what the provider can grant now
	ReasonGPUModel    = "gpu_model"     // no device of the requested model
	ReasonGPUMemory   = "gpu_memory"    // no device of the model with enough memory
	ReasonGPUs        = "gpus"          // too few such devices in all, free or not
	ReasonPrice       = "price"         // the provider's price is above request.max_price
	ReasonWindow      = "window"        // the provider's contribution hours end before the job's limit would
	ReasonBusy        = "busy"          // enough devices, but too few free now
	ReasonCPUs        = "cpus"          // too few CPUs free now
	ReasonMemory      = "memory"        // too little memory free now
	ReasonReserved    = "reserved"      // would fit, but is reserved for an earlier job
	ReasonAvoided     = "avoided"       // the provider failed the job before (Job.Avoid)
	// ReasonOtherPart counts, for a gang some of whose parts are leased,
	// the providers running those parts, which could take another part
	// now or once free but must not: each part needs a provider of its
	// own.
	ReasonOtherPart = "other_part"
	// ReasonFree counts, for a gang, offers that could take one of its
	// parts now: too few of them, since the gang needs one per part.
	ReasonFree = "free"
)

// A filter is one feasibility test. Each is a small type so that the order
// of the stack, and the reason an offer is counted under, is stated in one
// place (feasibility) rather than spread through the matcher.
type filter interface {
	// pass reports whether the offer in shape s could take the job's demand.
	pass(d *demand, s *shape) bool
}

type namedFilter struct {
	reason string
	filter
}

// feasibility is the filter stack. The order goes from what the submitter
// can only fix by changing the declaration (image, model, per-device memory,
// device count) to what waiting fixes (busy devices, CPUs, memory), so that
// the reason counted for an offer tells the submitter which of the two
// applies. Whether the provider can be reached at all comes first, then
// whether it takes work at all (draining, outside its hours), then whether
// it runs images: no amount of room makes up for any of them. A provider
// that lends no disk (its disk is full, or it cannot bound a job's) takes no
// work either, as one draining; one that takes only jobs with GPUs turns a
// job without any away whatever it has free. The disk a provider can grant
// shrinks and grows with its jobs' disks, so a job turned away for it may
// find it there later. The window
// comes after the devices and before what is busy: a provider whose hours
// end too soon cannot take the job however much of it is free, but a
// shorter limit or its next window can mend that, and one too small never.
func feasibility() [numFilters]namedFilter {
	return [numFilters]namedFilter{
		{ReasonUnreachable, reachableFilter{}},
		{ReasonDraining, drainingFilter{}},
		{ReasonClosed, closedFilter{}},
		{ReasonNoDisk, noDiskFilter{}},
		{ReasonNoImages, imagesFilter{}},
		{ReasonNeedImage, requireImageFilter{}},
		{ReasonCPUJobs, cpuJobsFilter{}},
		{ReasonDisk, diskFilter{}},
		{ReasonGPUModel, modelFilter{}},
		{ReasonGPUMemory, gpuMemoryFilter{}},
		{ReasonGPUs, gpuCountFilter{}},
		{ReasonPrice, priceFilter{}},
		{ReasonWindow, windowFilter{}},
		{ReasonBusy, gpuFreeFilter{}},
		{ReasonCPUs, cpuFilter{}},
		{ReasonMemory, memoryFilter{}},
	}
}

// firstFailure returns the reason of the first filter s fails, or "".
func firstFailure(fs *[numFilters]namedFilter, d *demand, s *shape) string {
	for i := range fs {
		if !fs[i].pass(d, s) {
			return fs[i].reason
		}
	}
	return ""
}

// numFilters is the length of the filter stack.
const numFilters = 16

type reachableFilter struct{}

func (reachableFilter) pass(_ *demand, s *shape) bool { return !s.static.unreachable }

type drainingFilter struct{}

func (drainingFilter) pass(_ *demand, s *shape) bool { return !s.static.draining }

type closedFilter struct{}

func (closedFilter) pass(_ *demand, s *shape) bool { return !s.static.closed }

type noDiskFilter struct{}

func (noDiskFilter) pass(_ *demand, s *shape) bool { return !s.static.noDisk }

type cpuJobsFilter struct{}

func (cpuJobsFilter) pass(d *demand, s *shape) bool { return d.gpus > 0 || !s.static.noCPUJobs }

type imagesFilter struct{}

func (imagesFilter) pass(d *demand, s *shape) bool { return !d.image || s.static.images }

type requireImageFilter struct{}

func (requireImageFilter) pass(d *demand, s *shape) bool { return d.image || !s.static.requireImage }

type diskFilter struct{}

func (diskFilter) pass(d *demand, s *shape) bool {
	return s.static.maxJobDisk == 0 || d.disk <= s.static.maxJobDisk
}

type modelFilter struct{}

func (modelFilter) pass(d *demand, s *shape) bool {
	return d.gpus == 0 || d.con.model == "" || d.con.count(s.static.gpus, false) > 0
}

type gpuMemoryFilter struct{}

func (gpuMemoryFilter) pass(d *demand, s *shape) bool {
	return d.gpus == 0 || d.con.minMem == 0 || d.con.count(s.static.gpus, true) > 0
}

type gpuCountFilter struct{}

func (gpuCountFilter) pass(d *demand, s *shape) bool {
	return d.gpus == 0 || d.con.count(s.static.gpus, true) >= d.gpus
}

// priceFilter keeps a job with GPUs off a provider whose price per
// GPU-hour is above the job's cap. A job without GPUs is not capped: the
// price is per GPU.
type priceFilter struct{}

func (priceFilter) pass(d *demand, s *shape) bool {
	return d.gpus == 0 || d.maxPrice == 0 || s.static.price <= d.maxPrice
}

// windowFilter keeps a job off a provider whose contribution hours end
// before the job's lease would, started now: the provider stops taking
// work then, and a job cut short at its window's end is a job run for
// nothing. d.end is set only when some offer in the view has a window.
type windowFilter struct{}

func (windowFilter) pass(d *demand, s *shape) bool {
	return s.static.openUntil == 0 || d.end <= s.static.openUntil
}

type gpuFreeFilter struct{}

func (gpuFreeFilter) pass(d *demand, s *shape) bool {
	return d.gpus == 0 || d.con.count(s.avail, true) >= d.gpus
}

type cpuFilter struct{}

func (cpuFilter) pass(d *demand, s *shape) bool { return s.cpus >= d.cpus }

type memoryFilter struct{}

func (memoryFilter) pass(d *demand, s *shape) bool { return s.mem >= d.mem }

// shape is what feasibility and fit look at: an offer's devices in all
// (static) and its free devices, CPUs and memory now. Offers in the same
// shape are interchangeable except for the tie-break, which is what lets the
// matcher test a whole class of them at once.
type shape struct {
	static *staticShape
	avail  *multiset
	cpus   int64
	mem    uint64
}

// staticShape is the part of an offer that leases do not change.
type staticShape struct {
	id   int32
	gpus *multiset
	cpus int64
	mem  uint64
	offerTerms
}

// offerTerms are the conditions an offer puts on the jobs it takes, beside
// its resources; offers with the same resources and terms share a
// staticShape.
type offerTerms struct {
	// What the provider runs: jobs in their own image (images), and only
	// those (requireImage).
	images, requireImage bool
	// unreachable: no peer can reach the provider.
	unreachable bool
	// draining: the provider takes no new work, and its busy GPUs are
	// not worth waiting for.
	draining bool
	// closed: the provider is outside its contribution hours; like
	// draining, its GPUs are not coming back soon.
	closed bool
	// openUntil is when the provider's contribution window ends (ms since
	// the Unix epoch); 0: it does not end.
	openUntil int64
	// maxJobDisk caps request.disk; 0: no cap.
	maxJobDisk uint64
	// noDisk: the provider lends no disk now, so takes no job.
	noDisk bool
	// noCPUJobs: the provider takes only jobs that ask for GPUs.
	noCPUJobs bool
	// price is the offer's price per GPU-hour.
	price Price
}

// gpuType is a device model and memory size; devices of one type are
// interchangeable for matching.
type gpuType struct {
	model string
	lower string // model in lower case, for matching
	mem   uint64
}

// typeCount is how many devices of one type a multiset holds.
type typeCount struct {
	typ   int32
	count int32
}

// multiset is an interned bag of device types, sorted by type.
type multiset struct {
	id    int32
	types []typeCount
	total int
}

// constraint is a job's per-device requirement, with its verdict on each
// device type memoized: there are few types and many jobs.
type constraint struct {
	model  string // lower case; "" for any
	minMem uint64
	types  []gpuType
	// verdict per type: 0 unknown, then bit 1 set when the model matches
	// and bit 2 when model and memory both do.
	verdict []uint8
}

func (c *constraint) judge(t int32) uint8 {
	if v := c.verdict[t]; v != 0 {
		return v
	}
	v := uint8(4) // known
	gt := &c.types[t]
	if c.model == "" || modelMatches(gt.lower, c.model) {
		v |= 1
		if gt.mem >= c.minMem {
			v |= 2
		}
	}
	c.verdict[t] = v
	return v
}

// count returns how many devices in m satisfy the model (and, with
// withMem, the memory) requirement.
func (c *constraint) count(m *multiset, withMem bool) int {
	if c.model == "" && (c.minMem == 0 || !withMem) {
		return m.total
	}
	bit := uint8(1)
	if withMem {
		bit = 2
	}
	n := 0
	for _, tc := range m.types {
		if c.judge(tc.typ)&bit != 0 {
			n += int(tc.count)
		}
	}
	return n
}

// satisfies reports whether one device type meets the constraint.
func (c *constraint) satisfies(t int32) bool { return c.judge(t)&2 != 0 }

// modelMatches reports whether the requested model (lower case) names the
// offered one (lower case): equal, or a whole word in it. Drivers report
// "NVIDIA H100 80GB HBM3" while people write "H100"; matching whole words
// keeps "H100" from matching "H1000".
func modelMatches(offered, want string) bool {
	if offered == want {
		return true
	}
	for i := 0; i+len(want) <= len(offered); {
		j := strings.Index(offered[i:], want)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(want)
		if (start == 0 || !isAlnum(offered[start-1])) && (end == len(offered) || !isAlnum(offered[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// interner gives small integer IDs to device types, multisets, static
// shapes and constraints, so that comparing them is comparing integers.
type interner struct {
	types      []gpuType
	typeIDs    map[gpuTypeKey]int32
	multisets  map[string]*multiset
	nMultisets int32
	statics    map[staticKey]*staticShape
	nStatics   int32
	cons       map[conKey]*constraint
	keyBuf     []byte
}

type gpuTypeKey struct {
	model string
	mem   uint64
}

type staticKey struct {
	gpus int32
	cpus int64
	mem  uint64
	offerTerms
}

type conKey struct {
	model  string
	minMem uint64
}

func newInterner() *interner {
	return &interner{
		typeIDs:   make(map[gpuTypeKey]int32),
		multisets: make(map[string]*multiset),
		statics:   make(map[staticKey]*staticShape),
		cons:      make(map[conKey]*constraint),
	}
}

func (in *interner) gpuType(model string, mem uint64) int32 {
	k := gpuTypeKey{model, mem}
	if id, ok := in.typeIDs[k]; ok {
		return id
	}
	id := int32(len(in.types))
	in.types = append(in.types, gpuType{model: model, lower: strings.ToLower(model), mem: mem})
	in.typeIDs[k] = id
	return id
}

// multiset interns the bag of the given device types (in any order; types
// is sorted in place).
func (in *interner) multiset(types []int32) *multiset {
	sortInt32(types)
	b := in.keyBuf[:0]
	for _, t := range types {
		b = strconv.AppendInt(b, int64(t), 36)
		b = append(b, ',')
	}
	in.keyBuf = b
	if m, ok := in.multisets[string(b)]; ok {
		return m
	}
	m := &multiset{id: in.nMultisets, total: len(types)}
	in.nMultisets++
	for _, t := range types {
		if n := len(m.types); n > 0 && m.types[n-1].typ == t {
			m.types[n-1].count++
		} else {
			m.types = append(m.types, typeCount{typ: t, count: 1})
		}
	}
	in.multisets[string(b)] = m
	return m
}

func (in *interner) static(gpus *multiset, cpus int64, mem uint64, o *Offer) *staticShape {
	k := staticKey{gpus.id, cpus, mem, offerTerms{images: o.Images, requireImage: o.RequireImage, unreachable: o.Unreachable,
		draining: o.Draining, closed: o.Closed, openUntil: o.OpenUntil, maxJobDisk: o.MaxJobDisk, noDisk: o.NoDisk != "", noCPUJobs: o.NoCPUJobs,
		price: o.Price}}
	if s, ok := in.statics[k]; ok {
		return s
	}
	s := &staticShape{id: in.nStatics, gpus: gpus, cpus: cpus, mem: mem, offerTerms: k.offerTerms}
	in.nStatics++
	in.statics[k] = s
	return s
}

// constraint interns a job's device requirement. All device types are known
// before any job is looked at, so the verdict table never grows.
func (in *interner) constraint(model string, minMem uint64) *constraint {
	k := conKey{strings.ToLower(model), minMem}
	if c, ok := in.cons[k]; ok {
		return c
	}
	c := &constraint{model: k.model, minMem: minMem, types: in.types, verdict: make([]uint8, len(in.types))}
	in.cons[k] = c
	return c
}

// sortInt32 sorts a provider's device types: usually a handful, where an
// insertion sort beats the general one.
func sortInt32(s []int32) {
	if len(s) > 16 {
		slices.Sort(s)
		return
	}
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
