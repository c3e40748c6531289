package market

import (
	"fmt"
	"strconv"
	"strings"
)

// Why a job waits. The counts are taken once per request shape after the
// pass, against the offers as the pass leaves them. That is exact for every
// blocked job, not an approximation: an offer only loses room during a pass,
// so an offer that turned a job away when its turn came still does at the
// end, and the first filter it fails then is the one a person can act on.

func (m *matcher) waitFor(j *waitNote) Wait {
	if j.gang != 0 {
		reason, counts := m.gangWait(j.gang - 1)
		return Wait{Job: j.id, Reason: reason, Counts: counts}
	}
	s := j.shape
	if s.counts == nil {
		var x countExtremes
		s.counts, x = m.countReasons(&s.demand, ReasonBusy)
		s.largest, s.lastWindow, s.cheapest = x.largest, x.lastWindow, x.cheapest
		s.message = describeWait(s, s.counts)
	}
	w := Wait{Job: j.id, Reason: s.message, Counts: s.counts}
	if j.avoid != 0 {
		w.Counts = m.countAside(s, s.counts, m.avoid[j.avoid-1], ReasonAvoided, ReasonBusy)
		w.Reason = describeWait(s, w.Counts)
	}
	if j.localUntil != 0 {
		// It waits by choice, not for room: counts would call free offers
		// busy.
		w.Reason, w.Counts = "waiting for a provider that holds its data, until "+FormatInstant(j.localUntil), nil
	}
	if p := j.res; p != nil {
		w.Reason = fmt.Sprintf("reserved: waiting for provider %s to free %s at %s",
			ShortID(p.id), describeNeed(s, false), FormatInstant(p.res.from))
	}
	return w
}

// countExtremes is what a wait's sentence names beside its counts: the
// most GPUs of the kind asked for that any offer has, the latest end of
// the windows that turned the job away, and the lowest price of the
// offers its cap turned away (0: none).
type countExtremes struct {
	largest    int
	lastWindow int64
	cheapest   Price
}

// countReasons counts the offers by the first filter each fails, and an
// offer in the index that fails none under free: ReasonBusy for a lone
// job, which cannot meet one (see above), ReasonFree for a gang, which can.
func (m *matcher) countReasons(d *demand, free string) (counts map[string]int, x countExtremes) {
	counts = make(map[string]int)
	count := func(sh *shape, n int, free string) {
		r := firstFailure(&m.filters, d, sh)
		if r == "" {
			r = free
		}
		counts[r] += n
		if d.gpus > 0 {
			x.largest = max(x.largest, d.con.count(sh.static.gpus, true))
		}
		switch r {
		case ReasonWindow:
			x.lastWindow = max(x.lastWindow, sh.static.openUntil)
		case ReasonPrice:
			if x.cheapest == 0 || sh.static.price < x.cheapest {
				x.cheapest = sh.static.price
			}
		}
	}
	for _, b := range m.ix.buckets {
		for _, c := range b {
			count(&c.shape, c.count, free)
		}
	}
	for _, p := range m.reserved {
		count(&p.shape, 1, ReasonReserved)
	}
	return counts, x
}

// describeWait turns counts into a sentence such as
// "no offer has 8 free GPUs (3 offers too small, 2 busy)", or, where no
// offer in view could take the job however long it waited, "no offer in
// view could ever hold 16 GPUs: the most any has is 8 (2 offers too
// small)".
func describeWait(s *demandShape, counts map[string]int) string {
	total := 0
	for _, r := range reasonOrder() {
		total += counts[r]
	}
	switch {
	case total == 0:
		return "no offers in the view"
	case counts[ReasonAvoided] == total:
		return "every offer is from a provider that failed the job before, which it avoids"
	case counts[ReasonUnreachable] == total:
		return "no offer comes from a provider peers can reach (behind a NAT, with no relay)"
	case counts[ReasonDraining] == total:
		return "every offer is from a provider that is draining (its owner is taking it back)"
	case counts[ReasonClosed] == total:
		return "every offer is from a provider outside its contribution hours"
	case counts[ReasonNoDisk] == total:
		return "every offer is from a provider with no disk to lend (its disk is full, or it cannot bound what a job writes)"
	case counts[ReasonNoImages] == total:
		return "no offer can run jobs in their own image"
	case counts[ReasonNeedImage] == total:
		return "every offer requires a job to bring its own image (work.image)"
	case counts[ReasonCPUJobs] == total:
		return "every offer takes only jobs that ask for GPUs (request.gpus)"
	case counts[ReasonDisk] == total:
		return "no offer can grant request.disk " + Size(s.disk).String() + " now"
	case counts[ReasonGPUModel] == total:
		return "no offer has gpu_model " + s.model
	case counts[ReasonGPUModel]+counts[ReasonGPUMemory] == total:
		return fmt.Sprintf("no offer has %s with %s or more each", gpuNoun(s.model, 0), Size(s.con.minMem))
	case counts[ReasonPrice] == total:
		return fmt.Sprintf("every offer that could hold it asks more than request.max_price: the cheapest asks %s per GPU-hour, the cap is %s", s.cheapest, s.maxPrice)
	case counts[ReasonWindow] == total:
		return fmt.Sprintf("every offer's contribution hours end before the job's limit would (the last window closes at %s, the limit runs to %s)",
			FormatInstant(s.lastWindow), FormatInstant(s.end))
	}
	// Failures no change of load can mend: every offer in view lacks
	// what the job asks for, however long it waits. The disk a provider
	// can grant is not one of them: it comes back as its jobs end.
	never := counts[ReasonNoImages] + counts[ReasonNeedImage] + counts[ReasonCPUJobs] +
		counts[ReasonGPUModel] + counts[ReasonGPUMemory] + counts[ReasonGPUs] + counts[ReasonPrice]
	if never == total {
		most := ""
		if counts[ReasonGPUs] > 0 {
			most = fmt.Sprintf(": the most any has is %d", s.largest)
		}
		return fmt.Sprintf("no offer in view could ever hold %s%s (%s)", describeNeed(s, false), most, describeCounts(s, counts))
	}
	return fmt.Sprintf("no offer has %s (%s)", describeNeed(s, true), describeCounts(s, counts))
}

// describeCounts lists the counts in reasonOrder: "3 offers too small,
// 2 busy".
func describeCounts(s *demandShape, counts map[string]int) string {
	var parts []string
	for _, r := range reasonOrder() {
		n := counts[r]
		if n == 0 {
			continue
		}
		var phrase string
		switch r {
		case ReasonUnreachable:
			phrase = "unreachable"
		case ReasonDraining:
			phrase = "draining"
		case ReasonClosed:
			phrase = "outside its hours"
			if n != 1 {
				phrase = "outside their hours"
			}
		case ReasonNoDisk:
			phrase = "with no disk to lend"
		case ReasonNoImages:
			phrase = "cannot run images"
		case ReasonNeedImage:
			phrase = "requiring an image"
		case ReasonCPUJobs:
			phrase = "taking only jobs with GPUs"
		case ReasonDisk:
			phrase = "unable to grant request.disk " + Size(s.disk).String()
		case ReasonGPUModel:
			phrase = "without gpu_model " + s.model
		case ReasonGPUMemory:
			phrase = "without GPUs of " + Size(s.con.minMem).String()
		case ReasonGPUs:
			phrase = "too small"
		case ReasonPrice:
			phrase = "asking more than request.max_price " + s.maxPrice.String() + " (the cheapest " + s.cheapest.String() + ")"
		case ReasonWindow:
			phrase = "closing before the job would end"
		case ReasonBusy:
			phrase = "busy"
		case ReasonCPUs:
			phrase = "short of CPUs"
		case ReasonMemory:
			phrase = "short of memory"
		case ReasonReserved:
			phrase = "reserved for earlier jobs"
		case ReasonAvoided:
			phrase = "avoided, having failed it before"
		case ReasonOtherPart:
			phrase = "running another part of the gang"
			if n != 1 {
				phrase = "running other parts of the gang"
			}
		case ReasonFree:
			phrase = "free"
		}
		num := strconv.Itoa(n)
		if len(parts) == 0 {
			num += " offer"
			if n != 1 {
				num += "s"
			}
		}
		parts = append(parts, num+" "+phrase)
	}
	return strings.Join(parts, ", ")
}

func reasonOrder() [20]string {
	return [20]string{ReasonUnreachable, ReasonDraining, ReasonClosed, ReasonNoDisk, ReasonNoImages, ReasonNeedImage, ReasonCPUJobs, ReasonDisk, ReasonGPUModel, ReasonGPUMemory,
		ReasonGPUs, ReasonPrice, ReasonWindow, ReasonBusy, ReasonCPUs, ReasonMemory, ReasonReserved, ReasonAvoided, ReasonOtherPart, ReasonFree}
}

// describeNeed says what the job needs: "8 free GPUs", or with free false
// "8 GPUs"; CPUs and memory are named only for a job without GPUs, where
// they are all it asks for.
func describeNeed(s *demandShape, free bool) string {
	adj := ""
	if free {
		adj = "free "
	}
	if s.gpus == 0 {
		cpus := "CPUs"
		if s.cpus == 1 {
			cpus = "CPU"
		}
		return fmt.Sprintf("%d %s%s and %s of memory", s.cpus, adj, cpus, Size(s.mem))
	}
	return strconv.Itoa(s.gpus) + " " + adj + gpuNoun(s.model, s.gpus)
}

// gpuNoun names n GPUs of model ("" for any): "GPU", "H100 GPUs"; n of
// 0 is any number.
func gpuNoun(model string, n int) string {
	noun := "GPUs"
	if n == 1 {
		noun = "GPU"
	}
	if model != "" {
		noun = model + " " + noun
	}
	return noun
}

// ShortID abbreviates a peer ID for messages: "12D3…k2Xabc".
func ShortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return id[:4] + "…" + id[len(id)-6:]
}
