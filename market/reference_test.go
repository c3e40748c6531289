package market

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
	"pgregory.net/rapid"
)

// refMatch is a deliberately plain matcher: it tests every provider for
// every job, keeps no index, classes or caches, and recounts everything from
// scratch. It shares with Match only the hash primitives and the wording of
// messages. Match must agree with it exactly.
func refMatch(v View, o Options) Result {
	k := o.Reservations
	if k == 0 {
		k = DefaultReservations
	}
	starving := int64(o.StarvingAfter)
	if starving == 0 {
		starving = int64(DefaultStarvingAfter)
	}
	var hash [32]byte
	raw, _ := hex.DecodeString(v.Hash())
	copy(hash[:], raw)
	seed := seedFor(v.Epoch, hash)
	now := v.Now
	res := Result{ViewHash: v.Hash(), Assignments: []Assignment{}, Reservations: []Reservation{}, Waiting: []Wait{}}

	type rgpu struct {
		uuid   string
		model  string
		mem    uint64
		index  int
		free   bool
		leased bool
		freeAt int64
	}
	type rprov struct {
		id       string
		h        uint64
		gpus     []*rgpu
		cpus     int64
		mem      uint64
		totCPUs  int64
		totMem   uint64
		events   []event
		reserved bool
		from     int64
		// images, requireImage, unreachable, draining and closed are the
		// offer's flags of the same name; noDisk says the offer names a
		// NoDisk, noCPUJobs is its NoCPUJobs.
		images, requireImage, unreachable, draining, closed bool
		noDisk, noCPUJobs                                   bool
		// maxJobDisk is the offer's MaxJobDisk; 0: no cap.
		maxJobDisk uint64
		// openUntil is when the offer's contribution window ends; 0: never.
		openUntil int64
		// price is the offer's price per GPU-hour.
		price Price
		// listed and bloom are what the offer holds.
		listed map[string]bool
		bloom  *bloom.BloomFilter
	}
	var provs []*rprov
	offers := slices.Clone(v.Offers)
	slices.SortFunc(offers, func(a, b Offer) int { return cmp.Compare(a.Provider, b.Provider) })
	for _, off := range offers {
		p := &rprov{id: off.Provider, h: tieHash(&seed, 'p', off.Provider), cpus: int64(max(off.CPUs, 0)), mem: off.MemoryBytes}
		p.totCPUs, p.totMem = p.cpus, p.mem
		p.images, p.requireImage, p.unreachable, p.draining = off.Images, off.RequireImage, off.Unreachable, off.Draining
		p.closed, p.openUntil = off.Closed, off.OpenUntil
		p.noDisk, p.noCPUJobs, p.maxJobDisk = off.NoDisk != "", off.NoCPUJobs, off.MaxJobDisk
		p.price = off.Price
		p.listed = map[string]bool{}
		for _, d := range off.Holdings.Roots {
			p.listed[d.Root] = true
		}
		if len(off.Holdings.Bloom) > 0 {
			p.bloom, _ = decodeBloom(off.Holdings.Bloom)
		}
		for _, g := range off.GPUs {
			if g.UUID == "" {
				continue
			}
			fa := int64(never)
			if g.Free {
				fa = now
			}
			p.gpus = append(p.gpus, &rgpu{uuid: g.UUID, model: g.Model, mem: g.MemoryBytes, index: g.Index, free: g.Free, freeAt: fa})
		}
		slices.SortFunc(p.gpus, func(a, b *rgpu) int { return cmp.Compare(a.index, b.index) })
		provs = append(provs, p)
	}
	leasedJobs := map[string]bool{}
	for _, l := range v.Leases {
		leasedJobs[l.Job] = true
		for _, p := range provs {
			if p.id != l.Provider {
				continue
			}
			end := max(l.End(), now)
			for _, g := range p.gpus {
				if slices.Contains(l.GPUs, g.uuid) {
					if !g.leased || g.freeAt < end {
						g.freeAt = end
					}
					g.leased = true
				}
			}
			p.cpus = max(p.cpus-int64(max(l.CPUs, 0)), 0)
			if l.MemoryBytes > p.mem {
				p.mem = 0
			} else {
				p.mem -= l.MemoryBytes
			}
			p.events = append(p.events, event{end: end, cpus: int64(max(l.CPUs, 0)), mem: l.MemoryBytes})
		}
	}
	available := func(g *rgpu) bool { return g.free && !g.leased }
	modelOK := func(g *rgpu, want string) bool {
		if want == "" {
			return true
		}
		want = strings.ToLower(want)
		if strings.ToLower(g.model) == want {
			return true
		}
		return slices.Contains(strings.FieldsFunc(strings.ToLower(g.model), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}), want)
	}
	suits := func(g *rgpu, r *Request) bool { return modelOK(g, r.GPUModel) && g.mem >= uint64(r.GPUMemory) }
	countGPUs := func(p *rprov, r *Request, onlyFree bool) int {
		n := 0
		for _, g := range p.gpus {
			if suits(g, r) && (!onlyFree || available(g)) {
				n++
			}
		}
		return n
	}
	freeCount := func(p *rprov) int {
		n := 0
		for _, g := range p.gpus {
			if available(g) {
				n++
			}
		}
		return n
	}
	// inWindow: a lease of limit starting at from ends by the close of p's
	// contribution window.
	inWindow := func(p *rprov, from int64, limit Duration) bool {
		return p.openUntil == 0 || satAdd(from, int64(limit)) <= p.openUntil
	}
	fitsNow := func(p *rprov, r *Request) bool {
		return countGPUs(p, r, true) >= r.GPUs && p.cpus >= int64(r.CPUs) && p.mem >= uint64(r.Memory)
	}
	// overCap says p's price is above the cap of a job with GPUs.
	overCap := func(p *rprov, r *Request) bool {
		return r.GPUs > 0 && r.MaxPrice > 0 && p.price > r.MaxPrice
	}
	reason := func(p *rprov, r *Request) string {
		n := r.GPUs
		anyModel, anyBoth := false, false
		for _, g := range p.gpus {
			if modelOK(g, r.GPUModel) {
				anyModel = true
				if g.mem >= uint64(r.GPUMemory) {
					anyBoth = true
				}
			}
		}
		switch {
		case n > 0 && r.GPUModel != "" && !anyModel:
			return ReasonGPUModel
		case n > 0 && r.GPUMemory > 0 && !anyBoth:
			return ReasonGPUMemory
		case n > 0 && countGPUs(p, r, false) < n:
			return ReasonGPUs
		case overCap(p, r):
			return ReasonPrice
		case !inWindow(p, now, r.Limit):
			return ReasonWindow
		case n > 0 && countGPUs(p, r, true) < n:
			return ReasonBusy
		case p.cpus < int64(r.CPUs):
			return ReasonCPUs
		case p.mem < uint64(r.Memory):
			return ReasonMemory
		case p.reserved:
			return ReasonReserved
		}
		return "" // it could take the job now
	}

	// imageReason is the first of the reasons that depend on the offer's
	// flags alone, whatever is free on it: whether it takes work, runs the
	// job's image (or its lack of one), takes a job without GPUs, and can
	// grant its disk.
	imageReason := func(p *rprov, j *Job) string {
		switch {
		case p.unreachable:
			return ReasonUnreachable
		case p.draining:
			return ReasonDraining
		case p.closed:
			return ReasonClosed
		case p.noDisk:
			return ReasonNoDisk
		case j.Image && !p.images:
			return ReasonNoImages
		case !j.Image && p.requireImage:
			return ReasonNeedImage
		case j.Request.GPUs == 0 && p.noCPUJobs:
			return ReasonCPUJobs
		case p.maxJobDisk != 0 && j.Request.DiskBytes() > p.maxJobDisk:
			return ReasonDisk
		}
		return ""
	}

	// A provider's failures: the distinct submitters naming it in any job's
	// avoid list.
	namers := map[string]map[string]bool{}
	for _, j := range v.Jobs {
		for _, a := range j.Avoid {
			if namers[a] == nil {
				namers[a] = map[string]bool{}
			}
			namers[a][j.Submitter] = true
		}
	}
	failures := func(p *rprov) uint64 { return uint64(len(namers[p.id])) }

	usage := map[string]int64{}
	for _, u := range v.Usage {
		usage[u.Submitter] = max(u.GPUMillis, 0)
	}
	jobs := slices.Clone(v.Jobs)
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	jh := func(j *Job) uint64 { return tieHash(&seed, 'j', j.ID) }
	byAge := func(a, b *Job) int {
		if c := cmp.Compare(a.SubmittedAt, b.SubmittedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(jh(a), jh(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	}
	// A gang is its parts that are valid and open, by rank; a part's ID
	// is GANG.RANK, and parts that say different numbers of nodes belong
	// to different gangs.
	type rgang struct {
		id      string
		nodes   int
		parts   []*Job
		ranks   []int
		invalid bool
		visited bool
		avoid   []string // every part's avoid list
		// leased and gone count the parts that are not open: leased in
		// the view, or not; running are the providers of the view that
		// hold the leased ones.
		leased, gone int
		running      []*rprov
	}
	type gangKey struct {
		id    string
		nodes int
	}
	gangs := map[gangKey]*rgang{}
	gangOf := map[*Job]*rgang{}
	var invalid []Wait
	var starvingJobs []*Job
	queues := map[string][]*Job{}
	for i := range jobs {
		j := &jobs[i]
		if leasedJobs[j.ID] {
			continue
		}
		var ps problems
		validateRequest(&j.Request, &ps)
		if len(ps.list) > 0 {
			invalid = append(invalid, Wait{Job: j.ID, Reason: "invalid request: " + ps.list[0].String()})
			continue
		}
		if n := j.Request.Nodes; n >= 2 {
			id, r, ok := SplitTaskID(j.ID)
			if !ok || r >= n {
				invalid = append(invalid, Wait{Job: j.ID, Reason: fmt.Sprintf("invalid gang part: its ID must be GANG.RANK, RANK below request.nodes (%d)", n)})
				continue
			}
			g := gangs[gangKey{id, n}]
			if g == nil {
				g = &rgang{id: id, nodes: n}
				gangs[gangKey{id, n}] = g
			}
			g.parts = append(g.parts, j)
			g.ranks = append(g.ranks, r)
			gangOf[j] = g
		}
		if starving > 0 && now-j.SubmittedAt >= starving {
			starvingJobs = append(starvingJobs, j)
		} else {
			queues[j.Submitter] = append(queues[j.Submitter], j)
		}
	}
	for _, g := range gangs {
		byRank := make([]*Job, len(g.parts))
		order := seq(len(g.parts))
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(g.ranks[a], g.ranks[b]) })
		for i, k := range order {
			byRank[i] = g.parts[k]
		}
		g.parts = byRank
		for _, p := range g.parts {
			if p.Submitter != g.parts[0].Submitter || p.Request != g.parts[0].Request || p.Image != g.parts[0].Image {
				g.invalid = true
			}
			g.avoid = append(g.avoid, p.Avoid...)
		}
		if g.invalid {
			for _, p := range g.parts {
				invalid = append(invalid, Wait{Job: p.ID, Reason: "invalid gang: its parts differ in submitter, request or image"})
			}
		}
		for r := range g.nodes {
			if slices.Contains(g.ranks, r) {
				continue
			}
			found := false
			for _, l := range v.Leases {
				if l.Job != TaskID(g.id, r) {
					continue
				}
				found = true
				for _, p := range provs {
					if p.id == l.Provider && !slices.Contains(g.running, p) {
						g.running = append(g.running, p)
					}
				}
			}
			if found {
				g.leased++
			} else {
				g.gone++
			}
		}
	}
	slices.SortFunc(invalid, func(a, b Wait) int { return cmp.Compare(a.Job, b.Job) })
	slices.SortFunc(starvingJobs, byAge)
	for _, q := range queues {
		slices.SortFunc(q, byAge)
	}

	type waiting struct {
		job        *Job
		res        *rprov
		localUntil int64
		gang       *rgang
		gangRes    []*rprov // the providers the gang reserved, by part
		gangFrom   int64
	}
	// heldBy is how many of j's bytes p holds: each root once, at its
	// largest declared size.
	heldBy := func(p *rprov, j *Job) uint64 {
		if j.Request.Locality == LocalityOff {
			return 0
		}
		size := map[string]uint64{}
		for _, d := range j.Data {
			size[d.Root] = max(size[d.Root], d.Size)
		}
		var n uint64
		for root, sz := range size {
			if p.listed[root] || p.bloom != nil && p.bloom.TestString(root) {
				n = satAddUint(n, sz)
			}
		}
		return n
	}
	everFits := func(p *rprov, j *Job) bool {
		r := &j.Request
		if imageReason(p, j) != "" || overCap(p, r) || !inWindow(p, now, r.Limit) || countGPUs(p, r, false) < r.GPUs || p.totCPUs < int64(r.CPUs) || p.totMem < uint64(r.Memory) {
			return false
		}
		return r.GPUs == 0 || r.GPUModel == "" || reason(&rprov{gpus: p.gpus, cpus: 1 << 62, mem: 1 << 62}, r) != ReasonGPUModel
	}
	var pickIn func(j *Job, avoid []string, skip []*rprov, span Duration, local bool) (*rprov, [6]uint64, bool)
	// pick is the provider j takes now, leaving out those in skip and
	// those avoid names, by locality, best fit and the rendezvous weight;
	// couldWait says a holder of j's data could take it once it has room.
	pick := func(j *Job, avoid []string, skip []*rprov) (best *rprov, bestKey [6]uint64, couldWait bool) {
		return pickIn(j, avoid, skip, j.Request.Limit, true)
	}
	// pickIn is pick with the window a place must leave the job from now,
	// span, and whether a holder of the job's data comes first.
	pickIn = func(j *Job, avoid []string, skip []*rprov, span Duration, local bool) (best *rprov, bestKey [6]uint64, couldWait bool) {
		r := &j.Request
		for _, p := range provs {
			if slices.Contains(avoid, p.id) || slices.Contains(skip, p) {
				continue
			}
			held := heldBy(p, j)
			if !local {
				held = 0
			}
			if imageReason(p, j) != "" || overCap(p, r) || !inWindow(p, now, span) || !fitsNow(p, r) || p.reserved && satAdd(now, int64(r.Limit)) > p.from {
				if held > 0 && everFits(p, j) {
					couldWait = true
				}
				continue
			}
			key := [6]uint64{^held, uint64(freeCount(p) - r.GPUs), p.mem - uint64(r.Memory), uint64(p.price), failures(p), p.h ^ jh(j)}
			if best == nil || slices.Compare(key[:], bestKey[:]) < 0 {
				best, bestKey = p, key
			}
		}
		return best, bestKey, couldWait
	}
	var waits []waiting
	reservations := 0
	rank := 0
	place := func(j *Job, best *rprov) {
		r := &j.Request
		var cand []*rgpu
		for _, g := range best.gpus {
			if available(g) && suits(g, r) {
				cand = append(cand, g)
			}
		}
		slices.SortStableFunc(cand, func(a, b *rgpu) int { return cmp.Compare(a.mem, b.mem) })
		cand = cand[:r.GPUs]
		slices.SortFunc(cand, func(a, b *rgpu) int { return cmp.Compare(a.index, b.index) })
		end := satAdd(now, int64(r.Limit))
		uuids := []string{}
		for _, g := range cand {
			g.leased, g.freeAt = true, end
			uuids = append(uuids, g.uuid)
		}
		best.cpus -= int64(r.CPUs)
		best.mem -= uint64(r.Memory)
		best.events = append(best.events, event{end: end, cpus: int64(r.CPUs), mem: uint64(r.Memory)})
		usage[j.Submitter] = satAdd(usage[j.Submitter], Charge(r.GPUs, r.Limit))
		res.Assignments = append(res.Assignments, Assignment{Job: j.ID, Provider: best.id, GPUs: uuids, Rank: rank})
	}
	// earliest is when p will have room for j, counting leases as ending
	// at their limits, if p is one j may reserve.
	earliest := func(p *rprov, j *Job, avoid []string) (int64, bool) {
		r := &j.Request
		if p.reserved || slices.Contains(avoid, p.id) || imageReason(p, j) != "" || overCap(p, r) || countGPUs(p, r, false) < r.GPUs || p.totCPUs < int64(r.CPUs) || p.totMem < uint64(r.Memory) {
			return 0, false
		}
		if r.GPUs > 0 && r.GPUModel != "" && reason(&rprov{gpus: p.gpus, cpus: 1 << 62, mem: 1 << 62}, r) == ReasonGPUModel {
			return 0, false
		}
		// Earliest instant: devices, then CPUs and memory.
		at := now
		var times []int64
		for _, g := range p.gpus {
			if suits(g, r) && g.freeAt != never {
				times = append(times, g.freeAt)
			}
		}
		if len(times) < r.GPUs {
			return 0, false
		}
		slices.Sort(times)
		if r.GPUs > 0 {
			at = max(at, times[r.GPUs-1])
		}
		evs := slices.Clone(p.events)
		slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.end, b.end) })
		c, m := p.cpus, p.mem
		for _, e := range evs {
			if c >= int64(r.CPUs) && m >= uint64(r.Memory) {
				break
			}
			c, m = c+e.cpus, m+e.mem
			at = max(at, e.end)
		}
		if c < int64(r.CPUs) || m < uint64(r.Memory) {
			return 0, false
		}
		// The job must be done by the close of the provider's window,
		// counted from when the reservation starts.
		if !inWindow(p, at, r.Limit) {
			return 0, false
		}
		return at, true
	}
	visit := func(j *Job) bool {
		defer func() { rank++ }()
		best, bestKey, couldWait := pick(j, j.Avoid, nil)
		if wait := j.Request.LocalityWait; couldWait && wait > 0 && now < satAdd(j.SubmittedAt, int64(wait)) && (best == nil || bestKey[0] == ^uint64(0)) &&
			!(starving > 0 && now-j.SubmittedAt >= starving) {
			waits = append(waits, waiting{job: j, localUntil: satAdd(j.SubmittedAt, int64(wait))})
			return false
		}
		// A job that checkpoints, placed nowhere whole, may be cut at a
		// window's close where the window leaves it one interval and the
		// margin; a gang's part never is (gangs are visited apart).
		if span := j.Checkpoint + WindowMargin; best == nil && j.Checkpoint > 0 && span < j.Request.Limit {
			best, _, _ = pickIn(j, j.Avoid, nil, span, false)
		}
		if best != nil {
			place(j, best)
			return true
		}
		w := waiting{job: j}
		if reservations < k {
			var bestAt int64
			var bestW uint64
			for _, p := range provs {
				at, ok := earliest(p, j, j.Avoid)
				if !ok {
					continue
				}
				wgt := p.h ^ jh(j)
				if w.res == nil || at < bestAt || at == bestAt && (p.price < w.res.price || p.price == w.res.price && wgt < bestW) {
					w.res, bestAt, bestW = p, at, wgt
				}
			}
			if w.res != nil {
				w.res.reserved, w.res.from = true, bestAt
				reservations++
				res.Reservations = append(res.Reservations, Reservation{Job: j.ID, Provider: w.res.id, From: bestAt})
			}
		}
		waits = append(waits, w)
		return false
	}
	// visitGang places every open part of g on a provider of its own, in
	// rank order, or none, never on a provider running one of its leased
	// parts; a gang that cannot start reserves one provider per open part
	// for the earliest instant at which that many have room. A gang with a
	// part neither open nor leased only waits.
	visitGang := func(g *rgang) {
		if g.visited || g.invalid {
			return
		}
		g.visited = true
		var gangRes []*rprov
		var from int64
		if g.gone == 0 {
			var chosen []*rprov
			for _, part := range g.parts {
				best, _, _ := pick(part, g.avoid, append(slices.Clone(g.running), chosen...))
				if best == nil {
					break
				}
				chosen = append(chosen, best)
			}
			if len(chosen) == len(g.parts) {
				for i, part := range g.parts {
					place(part, chosen[i])
					rank++
				}
				return
			}
			if reservations < k {
				lead := g.parts[0]
				type cand struct {
					p  *rprov
					at int64
				}
				var cands []cand
				var instants []int64
				for _, p := range provs {
					if slices.Contains(g.running, p) {
						continue
					}
					if at, ok := earliest(p, lead, g.avoid); ok {
						cands = append(cands, cand{p, at})
						instants = append(instants, at)
					}
				}
				slices.Sort(instants)
				found := false
				for _, t := range slices.Compact(instants) {
					n := 0
					for _, c := range cands {
						if c.at <= t && inWindow(c.p, t, lead.Request.Limit) {
							n++
						}
					}
					if n >= len(g.parts) {
						from, found = t, true
						break
					}
				}
				if found {
					for _, part := range g.parts {
						var best *rprov
						var bestAt int64
						var bestW uint64
						for _, c := range cands {
							if c.at > from || c.p.reserved || !inWindow(c.p, from, lead.Request.Limit) {
								continue
							}
							wgt := c.p.h ^ jh(part)
							if best == nil || c.at < bestAt || c.at == bestAt && (c.p.price < best.price || c.p.price == best.price && wgt < bestW) {
								best, bestAt, bestW = c.p, c.at, wgt
							}
						}
						best.reserved, best.from = true, from
						gangRes = append(gangRes, best)
						res.Reservations = append(res.Reservations, Reservation{Job: part.ID, Provider: best.id, From: from})
					}
					reservations++
				}
			}
		}
		for _, part := range g.parts {
			waits = append(waits, waiting{job: part, gang: g, gangRes: gangRes, gangFrom: from})
			rank++
		}
	}
	visitAny := func(j *Job) {
		if g := gangOf[j]; g != nil {
			visitGang(g)
			return
		}
		visit(j)
	}
	for _, j := range starvingJobs {
		visitAny(j)
	}
	for {
		var pick string
		found := false
		for _, s := range sortedKeys(queues) {
			if len(queues[s]) == 0 {
				continue
			}
			if !found || usage[s] < usage[pick] || usage[s] == usage[pick] &&
				(tieHash(&seed, 's', s) < tieHash(&seed, 's', pick) || tieHash(&seed, 's', s) == tieHash(&seed, 's', pick) && s < pick) {
				pick, found = s, true
			}
		}
		if !found {
			break
		}
		j := queues[pick][0]
		queues[pick] = queues[pick][1:]
		visitAny(j)
	}
	for _, w := range waits {
		r := &w.job.Request
		avoid := w.job.Avoid
		if w.gang != nil {
			avoid = w.gang.avoid
		}
		counts := map[string]int{}
		largest := 0
		var lastWindow int64
		var cheapest Price
		for _, p := range provs {
			if r.GPUs > 0 {
				largest = max(largest, countGPUs(p, r, false))
			}
			if ir := imageReason(p, w.job); ir != "" {
				counts[ir]++
				continue
			}
			why := reason(p, r)
			if why == "" {
				// Room now: a lone job that waits never meets one, a
				// gang meets too few.
				why = ReasonBusy
				if w.gang != nil {
					why = ReasonFree
				}
			}
			if why == ReasonWindow {
				lastWindow = max(lastWindow, p.openUntil)
			}
			if why == ReasonPrice && (cheapest == 0 || p.price < cheapest) {
				cheapest = p.price
			}
			switch why {
			case ReasonBusy, ReasonCPUs, ReasonMemory, ReasonReserved, ReasonFree:
				// It could take the job, now or once free, but for the
				// gang's part it runs or the job's avoid list.
				switch {
				case w.gang != nil && slices.Contains(w.gang.running, p):
					why = ReasonOtherPart
				case slices.Contains(avoid, p.id):
					why = ReasonAvoided
				}
			}
			counts[why]++
		}
		ds := &demandShape{demand: demand{gpus: r.GPUs, con: &constraint{minMem: uint64(r.GPUMemory)}, cpus: int64(r.CPUs), mem: uint64(r.Memory),
			disk: r.DiskBytes(), end: satAdd(now, int64(r.Limit)), maxPrice: r.MaxPrice}, model: r.GPUModel, largest: largest, lastWindow: lastWindow, cheapest: cheapest}
		text := describeWait(ds, counts)
		if w.localUntil != 0 {
			text, counts = "waiting for a provider that holds its data, until "+FormatInstant(w.localUntil), nil
		}
		if w.res != nil {
			text = fmt.Sprintf("reserved: waiting for provider %s to free %s at %s", ShortID(w.res.id), describeNeed(ds, false), FormatInstant(w.res.from))
		}
		if g := w.gang; g != nil {
			text = describeGangWait(ds, len(g.parts), g.leased, counts)
			if len(w.gangRes) > 0 {
				var ids []string
				for _, p := range w.gangRes {
					ids = append(ids, p.id)
				}
				text = describeGangReserved(ds, ids, w.gangFrom)
			}
			if g.gone > 0 {
				text, counts = describeGangInFlight(g.id, g.nodes, g.gone), nil
			}
		}
		res.Waiting = append(res.Waiting, Wait{Job: w.job.ID, Reason: text, Counts: counts})
	}
	res.Waiting = append(res.Waiting, invalid...)
	return res
}

// genView draws a small view. With dups, some entries repeat a key with
// other contents, to exercise the deduplication rule.
func genView(t *rapid.T, dups bool) (View, Options) {
	now := scenarioStart + rapid.Int64Range(0, 1_000_000).Draw(t, "now")
	v := View{Epoch: rapid.Uint64Range(0, 5).Draw(t, "epoch"), Now: now}
	models := []string{"H100", "NVIDIA H100 80GB HBM3", "A100-SXM4-40GB", "H1000"}
	mems := []uint64{uint64(40 * GiB), uint64(80 * GiB)}
	nProv := rapid.IntRange(0, 6).Draw(t, "providers")
	for i := range nProv {
		o := Offer{
			Provider:     fmt.Sprintf("12D3KooWprovider%02d", i),
			CPUs:         rapid.SampledFrom([]int{0, 8, 32, 64, 128}).Draw(t, "cpus"),
			MemoryBytes:  uint64(rapid.SampledFrom([]int{0, 16, 64, 256, 512}).Draw(t, "memGiB")) * uint64(GiB),
			Images:       rapid.IntRange(0, 3).Draw(t, "images") > 0,
			RequireImage: rapid.IntRange(0, 5).Draw(t, "requireImage") == 0,
			Unreachable:  rapid.IntRange(0, 7).Draw(t, "unreachable") == 0,
			Draining:     rapid.IntRange(0, 7).Draw(t, "draining") == 0,
			Closed:       rapid.IntRange(0, 7).Draw(t, "closed") == 0,
			NoCPUJobs:    rapid.IntRange(0, 5).Draw(t, "noCPUJobs") == 0,
			MaxJobDisk:   uint64(rapid.SampledFrom([]Size{0, 0, 0, 8 * GiB, 10 * GiB, 100 * GiB}).Draw(t, "maxJobDisk")),
			Price:        rapid.SampledFrom([]Price{0, 0, PriceUnit, 2 * PriceUnit, 2*PriceUnit + 400_000}).Draw(t, "price"),
		}
		if rapid.IntRange(0, 7).Draw(t, "noDisk") == 0 {
			o.NoDisk = rapid.SampledFrom([]string{DiskFull, DiskUnbounded}).Draw(t, "why")
		}
		// Windows end on the jobs' and leases' limits and between them, so
		// that a limit meets its window's end exactly, and one has ended.
		if rapid.IntRange(0, 2).Draw(t, "hasWindow") == 0 {
			o.OpenUntil = now + int64(rapid.SampledFrom([]Duration{-Minute, 10 * Minute, 30 * Minute, Hour, 90 * Minute, 2 * Hour, 3 * Hour, 4 * Hour, 6 * Hour}).Draw(t, "openUntil"))
		}
		for g := range rapid.IntRange(0, 8).Draw(t, "gpus") {
			uuid := fmt.Sprintf("GPU-%d-%d", i, g)
			if rapid.IntRange(0, 20).Draw(t, "nouuid") == 0 {
				uuid = ""
			}
			o.GPUs = append(o.GPUs, GPU{
				Index: g, UUID: uuid,
				Model:       rapid.SampledFrom(models).Draw(t, "model"),
				MemoryBytes: rapid.SampledFrom(mems).Draw(t, "gpumem"),
				Free:        rapid.IntRange(0, 4).Draw(t, "free") > 0,
			})
		}
		o.Holdings = genHoldings(t)
		v.Offers = append(v.Offers, o)
	}
	for i := range rapid.IntRange(0, 6).Draw(t, "leases") {
		p := rapid.IntRange(0, nProv).Draw(t, "leaseProvider") // nProv: a provider not in the view
		l := Lease{
			ID: fmt.Sprintf("lease%d", i), Job: fmt.Sprintf("running%d", i), Provider: fmt.Sprintf("12D3KooWprovider%02d", p),
			Submitter: "x", CPUs: rapid.IntRange(0, 16).Draw(t, "leaseCPUs"),
			MemoryBytes: uint64(rapid.IntRange(0, 64).Draw(t, "leaseMem")) * uint64(GiB),
			Start:       now - rapid.Int64Range(0, int64(3*Hour)).Draw(t, "leaseAge"),
			Limit:       rapid.SampledFrom([]Duration{Minute, 30 * Minute, Hour, 3 * Hour}).Draw(t, "leaseLimit"),
		}
		for g := range 8 {
			if rapid.IntRange(0, 3).Draw(t, "leaseGPU") == 0 {
				l.GPUs = append(l.GPUs, fmt.Sprintf("GPU-%d-%d", p, g))
			}
		}
		v.Leases = append(v.Leases, l)
	}
	subs := []string{"alice", "bob", "carol", "dave"}
	nJobs := rapid.IntRange(0, 16).Draw(t, "jobs")
	for i := range nJobs {
		id := fmt.Sprintf("job%02d", i)
		if i == 0 && rapid.IntRange(0, 5).Draw(t, "runningJob") == 0 {
			id = "running0" // already leased, if lease0 is drawn
		}
		v.Jobs = append(v.Jobs, Job{
			ID: id, Submitter: rapid.SampledFrom(subs).Draw(t, "submitter"),
			SubmittedAt: now - rapid.SampledFrom([]int64{0, int64(Minute), int64(5 * Minute), int64(20 * Minute)}).Draw(t, "age"),
			Request: Request{
				GPUs:      rapid.SampledFrom([]int{-1, 0, 1, 1, 1, 2, 2, 3, 4, 8, 9}).Draw(t, "jobGPUs"),
				GPUModel:  rapid.SampledFrom([]string{"", "", "H100", "a100", "H200"}).Draw(t, "jobModel"),
				GPUMemory: rapid.SampledFrom([]Size{0, 0, 40 * GiB, 64 * GiB}).Draw(t, "jobGPUMem"),
				CPUs:      rapid.SampledFrom([]int{1, 2, 4, 8, 32}).Draw(t, "jobCPUs"),
				Memory:    Size(rapid.SampledFrom([]int{1, 4, 16, 64}).Draw(t, "jobMem")) * GiB,
				Limit:     rapid.SampledFrom([]Duration{10 * Minute, 30 * Minute, Hour, 2 * Hour, 4 * Hour}).Draw(t, "jobLimit"),
				Disk:      rapid.SampledFrom([]Size{0, 0, 16 * MiB, 10 * GiB, 50 * GiB}).Draw(t, "jobDisk"),
				MaxPrice:  rapid.SampledFrom([]Price{0, 0, 0, PriceUnit, 2 * PriceUnit}).Draw(t, "jobMaxPrice"),
			},
			Image:      rapid.IntRange(0, 3).Draw(t, "jobImage") == 0,
			Checkpoint: rapid.SampledFrom([]Duration{0, 0, 5 * Minute, 20 * Minute, Hour}).Draw(t, "jobCheckpoint"),
		})
		genJobData(t, &v.Jobs[len(v.Jobs)-1])
		if nProv > 0 && rapid.IntRange(0, 3).Draw(t, "hasAvoid") == 0 {
			for range rapid.IntRange(1, 3).Draw(t, "avoids") {
				p := rapid.IntRange(0, nProv).Draw(t, "avoidProvider") // nProv: not in the view
				v.Jobs[len(v.Jobs)-1].Avoid = append(v.Jobs[len(v.Jobs)-1].Avoid, fmt.Sprintf("12D3KooWprovider%02d", p))
			}
		}
	}
	genGangs(t, &v, nProv, subs, 0, 2)
	for _, s := range subs {
		if rapid.Bool().Draw(t, "hasUsage") {
			v.Usage = append(v.Usage, Usage{Submitter: s, GPUMillis: rapid.Int64Range(0, int64(4*Hour)).Draw(t, "usage")})
		}
	}
	if dups {
		if len(v.Jobs) > 0 && rapid.Bool().Draw(t, "dupJob") {
			j := v.Jobs[0]
			j.Request.GPUs = (j.Request.GPUs + 1) % 9
			v.Jobs = append(v.Jobs, j)
		}
		if len(v.Offers) > 0 && rapid.Bool().Draw(t, "dupOffer") {
			o := v.Offers[0]
			o.CPUs++
			v.Offers = append(v.Offers, o)
		}
		if len(v.Leases) > 0 && rapid.Bool().Draw(t, "dupLease") {
			l := v.Leases[0]
			l.Limit++
			v.Leases = append(v.Leases, l)
		}
	}
	o := Options{
		Reservations:  rapid.SampledFrom([]int{-1, 0, 1, 2}).Draw(t, "k"),
		StarvingAfter: rapid.SampledFrom([]Duration{0, -1, Minute, 3 * Minute}).Draw(t, "starving"),
	}
	return v, o
}

// genGangs adds gangs of 2 to 4 parts to v: mostly with every part open;
// sometimes with one part gone, or leased, possibly by a provider not in
// the view; sometimes with some parts leased by providers of the view,
// on their devices, the others still to place, now and then with a part
// gone as well; now and then with parts that disagree, or a part whose
// ID is no rank of its gang.
func genGangs(t *rapid.T, v *View, nProv int, subs []string, least, most int) {
	provider := func(p int) string { return fmt.Sprintf("12D3KooWprovider%02d", p) }
	// leaseOn leases part on provider p of the view, on as many of its
	// devices as the part asks for that it draws, from a start that
	// frees them at different instants.
	leaseOn := func(part Job, p int) {
		l := Lease{ID: "lease-" + part.ID, Job: part.ID, Provider: provider(p), Submitter: part.Submitter,
			CPUs: part.Request.CPUs, MemoryBytes: uint64(part.Request.Memory),
			Start: v.Now - int64(rapid.SampledFrom([]Duration{0, 5 * Minute, 30 * Minute}).Draw(t, "partStart")), Limit: part.Request.Limit}
		for _, g := range v.Offers[p].GPUs {
			if len(l.GPUs) < part.Request.GPUs && g.UUID != "" && rapid.IntRange(0, 2).Draw(t, "partGPU") > 0 {
				l.GPUs = append(l.GPUs, g.UUID)
			}
		}
		v.Leases = append(v.Leases, l)
	}
	for gi := range rapid.IntRange(least, most).Draw(t, "gangs") {
		n := rapid.IntRange(2, 4).Draw(t, "nodes")
		id := fmt.Sprintf("gang%d", gi)
		g := Job{
			Submitter:   rapid.SampledFrom(subs).Draw(t, "gangSubmitter"),
			SubmittedAt: v.Now - rapid.SampledFrom([]int64{0, int64(Minute), int64(5 * Minute), int64(20 * Minute)}).Draw(t, "gangAge"),
			Request: Request{
				GPUs:      rapid.SampledFrom([]int{0, 1, 1, 2, 4, 8}).Draw(t, "gangGPUs"),
				GPUModel:  rapid.SampledFrom([]string{"", "", "H100"}).Draw(t, "gangModel"),
				CPUs:      rapid.SampledFrom([]int{1, 2, 8, 32}).Draw(t, "gangCPUs"),
				Memory:    Size(rapid.SampledFrom([]int{1, 4, 64}).Draw(t, "gangMem")) * GiB,
				Limit:     rapid.SampledFrom([]Duration{10 * Minute, 30 * Minute, Hour, 4 * Hour}).Draw(t, "gangLimit"),
				Nodes:     n,
				GPUMemory: rapid.SampledFrom([]Size{0, 0, 64 * GiB}).Draw(t, "gangGPUMem"),
				MaxPrice:  rapid.SampledFrom([]Price{0, 0, 2 * PriceUnit}).Draw(t, "gangMaxPrice"),
			},
			Image: rapid.IntRange(0, 3).Draw(t, "gangImage") == 0,
		}
		if g.Request.GPUs == 0 {
			g.Request.GPUModel, g.Request.GPUMemory = "", 0
		}
		genJobData(t, &g)
		state := rapid.IntRange(0, 19).Draw(t, "gangState")
		if nProv == 0 && state >= 6 && state <= 9 {
			state = 2 // no provider of the view to lease on
		}
		odd := rapid.IntRange(0, n-1).Draw(t, "oddPart")
		open := (odd + 1) % n // a part that stays open where several are leased
		for r := range n {
			part := g
			part.ID = TaskID(id, r)
			if nProv > 0 && rapid.IntRange(0, 7).Draw(t, "partAvoids") == 0 {
				part.Avoid = []string{provider(rapid.IntRange(0, nProv).Draw(t, "partAvoid"))}
			}
			switch {
			case r == odd && (state == 0 || state == 1): // gone from the view
				continue
			case r == odd && (state == 2 || state == 3): // leased, maybe by a provider not in the view
				p := rapid.IntRange(0, nProv).Draw(t, "partProvider")
				v.Leases = append(v.Leases, Lease{ID: "lease-" + part.ID, Job: part.ID, Provider: provider(p),
					Submitter: part.Submitter, GPUs: []string{fmt.Sprintf("GPU-%d-%d", p, r)}, CPUs: part.Request.CPUs,
					MemoryBytes: uint64(part.Request.Memory), Start: v.Now, Limit: part.Request.Limit})
			case r == odd && state == 4: // disagrees with the others
				part.Request.CPUs++
			case r == odd && state == 5: // no rank of its gang
				part.ID = TaskID(id, n)
			case state == 9 && r != odd && r != open: // gone, beside a leased part
				continue
			case state >= 6 && state <= 9 && r != open && (r == odd || rapid.Bool().Draw(t, "partLeased")):
				// Leased by a provider of the view, the gang's others
				// still to place.
				leaseOn(part, rapid.IntRange(0, nProv-1).Draw(t, "partProvider"))
				if rapid.IntRange(0, 3).Draw(t, "leasedJobStays") > 0 {
					continue // a leased job may leave the view's jobs, or stay
				}
			}
			v.Jobs = append(v.Jobs, part)
		}
	}
}

// genGangView draws a view made for gangs: enough providers that take
// work, leases that end at different instants, a few lone jobs around
// one to three gangs.
func genGangView(t *rapid.T) (View, Options) {
	now := scenarioStart + rapid.Int64Range(0, 1_000_000).Draw(t, "now")
	v := View{Epoch: rapid.Uint64Range(0, 5).Draw(t, "epoch"), Now: now}
	nProv := rapid.IntRange(2, 7).Draw(t, "providers")
	for i := range nProv {
		o := Offer{
			Provider:     fmt.Sprintf("12D3KooWprovider%02d", i),
			CPUs:         rapid.SampledFrom([]int{8, 64, 128}).Draw(t, "cpus"),
			MemoryBytes:  uint64(rapid.SampledFrom([]int{16, 256, 512}).Draw(t, "memGiB")) * uint64(GiB),
			Images:       rapid.IntRange(0, 5).Draw(t, "images") > 0,
			RequireImage: rapid.IntRange(0, 11).Draw(t, "requireImage") == 0,
			Unreachable:  rapid.IntRange(0, 11).Draw(t, "unreachable") == 0,
			Draining:     rapid.IntRange(0, 11).Draw(t, "draining") == 0,
			Closed:       rapid.IntRange(0, 11).Draw(t, "closed") == 0,
			NoDisk:       rapid.SampledFrom([]string{"", "", "", "", "", "", "", "", "", "", "", DiskFull}).Draw(t, "noDisk"),
			MaxJobDisk:   uint64(rapid.SampledFrom([]Size{0, 0, 0, 10 * GiB, 100 * GiB}).Draw(t, "maxJobDisk")),
			Price:        rapid.SampledFrom([]Price{0, PriceUnit, 2 * PriceUnit}).Draw(t, "price"),
		}
		if rapid.IntRange(0, 3).Draw(t, "hasWindow") == 0 {
			o.OpenUntil = now + int64(rapid.SampledFrom([]Duration{10 * Minute, 30 * Minute, Hour, 2 * Hour, 3 * Hour, 6 * Hour}).Draw(t, "openUntil"))
		}
		model := rapid.SampledFrom([]string{"NVIDIA H100 80GB HBM3", "A100-SXM4-40GB"}).Draw(t, "model")
		mem := uint64(80 * GiB)
		if model != "NVIDIA H100 80GB HBM3" {
			mem = uint64(40 * GiB)
		}
		for g := range rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus") {
			o.GPUs = append(o.GPUs, GPU{Index: g, UUID: fmt.Sprintf("GPU-%d-%d", i, g), Model: model, MemoryBytes: mem,
				Free: rapid.IntRange(0, 3).Draw(t, "free") > 0})
		}
		o.Holdings = genHoldings(t)
		v.Offers = append(v.Offers, o)
	}
	for i := range rapid.IntRange(0, 6).Draw(t, "leases") {
		p := rapid.IntRange(0, nProv-1).Draw(t, "leaseProvider")
		l := Lease{
			ID: fmt.Sprintf("lease%d", i), Job: fmt.Sprintf("running%d", i), Provider: fmt.Sprintf("12D3KooWprovider%02d", p),
			Submitter: "x", CPUs: rapid.IntRange(0, 16).Draw(t, "leaseCPUs"),
			MemoryBytes: uint64(rapid.IntRange(0, 64).Draw(t, "leaseMem")) * uint64(GiB),
			Start:       now - rapid.Int64Range(0, int64(3*Hour)).Draw(t, "leaseAge"),
			Limit:       rapid.SampledFrom([]Duration{Minute, 30 * Minute, Hour, 3 * Hour, 4 * Hour}).Draw(t, "leaseLimit"),
		}
		for g := range 8 {
			if rapid.IntRange(0, 2).Draw(t, "leaseGPU") == 0 {
				l.GPUs = append(l.GPUs, fmt.Sprintf("GPU-%d-%d", p, g))
			}
		}
		v.Leases = append(v.Leases, l)
	}
	subs := []string{"alice", "bob", "carol"}
	for i := range rapid.IntRange(0, 6).Draw(t, "jobs") {
		j := Job{
			ID: fmt.Sprintf("job%02d", i), Submitter: rapid.SampledFrom(subs).Draw(t, "submitter"),
			SubmittedAt: now - rapid.SampledFrom([]int64{0, int64(Minute), int64(20 * Minute)}).Draw(t, "age"),
			Request: Request{
				GPUs: rapid.SampledFrom([]int{0, 1, 1, 2, 4}).Draw(t, "jobGPUs"), CPUs: rapid.SampledFrom([]int{1, 4}).Draw(t, "jobCPUs"),
				Memory: GiB, Limit: rapid.SampledFrom([]Duration{10 * Minute, Hour, 4 * Hour}).Draw(t, "jobLimit"),
			},
			Checkpoint: rapid.SampledFrom([]Duration{0, 0, 5 * Minute, 20 * Minute}).Draw(t, "jobCheckpoint"),
		}
		genJobData(t, &j)
		v.Jobs = append(v.Jobs, j)
	}
	genGangs(t, &v, nProv, subs, 1, 3)
	for _, s := range subs {
		if rapid.Bool().Draw(t, "hasUsage") {
			v.Usage = append(v.Usage, Usage{Submitter: s, GPUMillis: rapid.Int64Range(0, int64(4*Hour)).Draw(t, "usage")})
		}
	}
	return v, Options{
		Reservations:  rapid.SampledFrom([]int{-1, 0, 1, 2}).Draw(t, "k"),
		StarvingAfter: rapid.SampledFrom([]Duration{0, -1, Minute}).Draw(t, "starving"),
	}
}

// testRoots are the roots views draw from: few, so that jobs and offers
// share them often.
var testRoots = []string{"rootA", "rootB", "rootC", "rootD"}

// bloomOf builds a filter of roots as NewHoldings does.
func bloomOf(roots ...string) []byte {
	f := bloom.NewWithEstimates(HoldingsBloomCapacity, HoldingsBloomFalsePositive)
	for _, r := range roots {
		f.AddString(r)
	}
	b, _ := f.MarshalBinary()
	return b
}

// genHoldings draws what an offer holds: some roots listed, some only in a
// filter, sometimes both, sometimes a filter that does not decode.
func genHoldings(t *rapid.T) Holdings {
	var h Holdings
	var inBloom []string
	for _, r := range testRoots {
		switch rapid.IntRange(0, 5).Draw(t, "holds") {
		case 0:
			h.Roots = append(h.Roots, Datum{Root: r, Size: uint64(rapid.IntRange(0, 9).Draw(t, "heldSize")) * uint64(GiB)})
		case 1:
			inBloom = append(inBloom, r)
		}
	}
	if len(inBloom) > 0 {
		h.Bloom = bloomOf(inBloom...)
		if rapid.IntRange(0, 10).Draw(t, "badBloom") == 0 {
			h.Bloom = h.Bloom[:30]
		}
	}
	return h
}

// genJobData draws what a job reads and its locality settings.
func genJobData(t *rapid.T, j *Job) {
	for range rapid.IntRange(0, 3).Draw(t, "data") {
		j.Data = append(j.Data, Datum{
			Root: rapid.SampledFrom(testRoots).Draw(t, "root"),
			Size: rapid.SampledFrom([]uint64{0, uint64(GiB), uint64(10 * GiB), uint64(10*GiB) + 1}).Draw(t, "size"),
		})
	}
	switch rapid.IntRange(0, 5).Draw(t, "locality") {
	case 0:
		j.Request.Locality = LocalityOff
	case 1, 2:
		j.Request.LocalityWait = rapid.SampledFrom([]Duration{30 * Second, 2 * Minute, MaxLocalityWait}).Draw(t, "localityWait")
	}
}

func TestMatchAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, o := genView(t, false)
		got := Match(v, o)
		want := refMatch(v, o)
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			vj, _ := json.Marshal(v)
			t.Fatalf("Match and the reference differ\nview %s\noptions %+v\nMatch:\n%s\nreference:\n%s", vj, o, gj, wj)
		}
	})
}

// TestGangsAgainstReference is TestMatchAgainstReference on views made
// for gangs, where they are placed, reserve and backfill often, and
// checks the invariants there too.
func TestGangsAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, o := genGangView(t)
		got := Match(v, o)
		want := refMatch(v, o)
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			vj, _ := json.Marshal(v)
			t.Fatalf("Match and the reference differ\nview %s\noptions %+v\nMatch:\n%s\nreference:\n%s", vj, o, gj, wj)
		}
		checkInvariants(t, v, o, got)
	})
}

// TestMatchInvariants checks, on views with duplicates and their shuffles,
// what must hold whatever the algorithm: no device, CPU or byte given twice,
// constraints respected, every open job accounted for, and the same bytes
// out for any order in.
func TestMatchInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, o := genView(t, true)
		r := Match(v, o)
		checkInvariants(t, v, o, r)
		a, _ := json.Marshal(r)
		for range 3 {
			s := shuffleView(t, v)
			b, _ := json.Marshal(Match(s, o))
			if string(a) != string(b) {
				t.Fatalf("shuffled input changed the result\n%s\n%s", a, b)
			}
		}
	})
}

func checkInvariants(t *rapid.T, v View, o Options, r Result) {
	n := normalize(&v)
	offers := map[string]*Offer{}
	for _, off := range n.offers {
		offers[off.Provider] = off
	}
	leasedJob := map[string]bool{}
	held := map[string]bool{} // provider/uuid
	usedCPUs := map[string]int{}
	usedMem := map[string]uint64{}
	for _, l := range n.leases {
		leasedJob[l.Job] = true
		for _, g := range l.GPUs {
			held[l.Provider+"/"+g] = true
		}
		usedCPUs[l.Provider] += max(l.CPUs, 0)
		usedMem[l.Provider] += l.MemoryBytes
	}
	jobs := map[string]*Job{}
	for _, j := range n.jobs {
		if !leasedJob[j.ID] {
			jobs[j.ID] = j
		}
	}
	seen := map[string]bool{}
	for _, a := range r.Assignments {
		j, ok := jobs[a.Job]
		if !ok || seen[a.Job] {
			t.Fatalf("assignment of unknown, leased or repeated job %s", a.Job)
		}
		seen[a.Job] = true
		off := offers[a.Provider]
		if off == nil {
			t.Fatalf("assignment to unknown provider %s", a.Provider)
		}
		if len(a.GPUs) != j.Request.GPUs {
			t.Fatalf("%s got %d devices, asked %d", a.Job, len(a.GPUs), j.Request.GPUs)
		}
		for _, u := range a.GPUs {
			key := a.Provider + "/" + u
			if held[key] {
				t.Fatalf("device %s given twice or while leased", key)
			}
			held[key] = true
			i := slices.IndexFunc(off.GPUs, func(g GPU) bool { return g.UUID == u })
			if i < 0 || !off.GPUs[i].Free {
				t.Fatalf("device %s not free in the offer", key)
			}
			g := off.GPUs[i]
			if g.MemoryBytes < uint64(j.Request.GPUMemory) || !modelMatches(strings.ToLower(g.Model), strings.ToLower(j.Request.GPUModel)) && j.Request.GPUModel != "" {
				t.Fatalf("device %s (%s, %d) breaks %s's constraints %+v", key, g.Model, g.MemoryBytes, a.Job, j.Request)
			}
		}
		usedCPUs[a.Provider] += j.Request.CPUs
		usedMem[a.Provider] += uint64(j.Request.Memory)
		if usedCPUs[a.Provider] > max(off.CPUs, 0) || usedMem[a.Provider] > off.MemoryBytes {
			t.Fatalf("provider %s over-committed: %d CPUs of %d, %d bytes of %d", a.Provider, usedCPUs[a.Provider], off.CPUs, usedMem[a.Provider], off.MemoryBytes)
		}
	}
	for _, w := range r.Waiting {
		if _, ok := jobs[w.Job]; !ok || seen[w.Job] {
			t.Fatalf("wait for unknown, leased or repeated job %s", w.Job)
		}
		seen[w.Job] = true
		if w.Reason == "" {
			t.Fatalf("job %s waits without a reason", w.Job)
		}
	}
	if len(seen) != len(jobs) {
		t.Fatalf("%d open jobs, %d accounted for", len(jobs), len(seen))
	}
	k := o.Reservations
	if k == 0 {
		k = DefaultReservations
	}
	// A gang's reservations count once toward K.
	holders := map[string]bool{}
	for _, res := range r.Reservations {
		holders[gangOrJob(jobs[res.Job])] = true
	}
	if len(holders) > max(k, 0) {
		t.Fatalf("%d jobs and gangs reserved, K is %d", len(holders), k)
	}
	// A gang starts whole, one part per provider.
	placed := map[string]map[string]bool{} // gang → providers
	for _, a := range r.Assignments {
		j := jobs[a.Job]
		if !j.Request.Gang() {
			continue
		}
		g := gangOrJob(j)
		if placed[g] == nil {
			placed[g] = map[string]bool{}
		}
		if placed[g][a.Provider] {
			t.Fatalf("two parts of gang %s on provider %s", g, a.Provider)
		}
		placed[g][a.Provider] = true
	}
	// Every open part at once, and none beside a leased part of its gang:
	// the parts still to place go on providers of their own.
	open := map[string]int{}
	for _, j := range jobs {
		if j.Request.Gang() {
			open[gangOrJob(j)]++
		}
	}
	for g, ps := range placed {
		if len(ps) != open[g] {
			t.Fatalf("gang %s placed %d of its %d open parts", g, len(ps), open[g])
		}
	}
	for _, l := range n.leases {
		if g, _, ok := SplitTaskID(l.Job); ok && placed[g][l.Provider] {
			t.Fatalf("gang %s placed a part on %s, which runs its part %s", g, l.Provider, l.Job)
		}
	}
	rp := map[string]bool{}
	for _, res := range r.Reservations {
		if rp[res.Provider] {
			t.Fatalf("provider %s reserved twice", res.Provider)
		}
		rp[res.Provider] = true
		if res.From < v.Now {
			t.Fatalf("reservation in the past: %+v", res)
		}
	}
}

// gangOrJob is the ID of j's gang, or j's own for a job that is no part
// of one.
func gangOrJob(j *Job) string {
	if id, _, ok := SplitTaskID(j.ID); ok && j.Request.Gang() {
		return id
	}
	return j.ID
}

func shuffleView(t *rapid.T, v View) View {
	perm := func(n int, label string) []int {
		return rapid.Permutation(seq(n)).Draw(t, label)
	}
	s := View{Epoch: v.Epoch, Now: v.Now}
	for _, i := range perm(len(v.Jobs), "pj") {
		s.Jobs = append(s.Jobs, v.Jobs[i])
	}
	for _, i := range perm(len(v.Offers), "po") {
		o := v.Offers[i]
		gs := make([]GPU, 0, len(o.GPUs))
		for _, g := range perm(len(o.GPUs), "pg") {
			gs = append(gs, o.GPUs[g])
		}
		o.GPUs = gs
		s.Offers = append(s.Offers, o)
	}
	for _, i := range perm(len(v.Leases), "pl") {
		l := v.Leases[i]
		us := make([]string, 0, len(l.GPUs))
		for _, g := range perm(len(l.GPUs), "plg") {
			us = append(us, l.GPUs[g])
		}
		l.GPUs = us
		s.Leases = append(s.Leases, l)
	}
	for _, i := range perm(len(v.Usage), "pu") {
		s.Usage = append(s.Usage, v.Usage[i])
	}
	return s
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestMain runs the property tests over a few thousand views unless told
// otherwise with -rapid.checks.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "3000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// TestViewHashHours checks that an offer's contribution hours are part of
// the view: peers that disagree on them must not think they match the same
// view, and two windows that end apart must hash apart.
func TestViewHashHours(t *testing.T) {
	v := View{Now: scenarioStart, Offers: []Offer{{Provider: "p1", CPUs: 8, MemoryBytes: uint64(GiB)}}}
	seen := map[string]string{}
	for _, c := range []struct {
		name      string
		closed    bool
		openUntil int64
	}{
		{"none", false, 0},
		{"closed", true, 0},
		{"window", false, scenarioStart + int64(Hour)},
		{"later window", false, scenarioStart + int64(2*Hour)},
		{"closed with window", true, scenarioStart + int64(Hour)},
	} {
		v.Offers[0].Closed, v.Offers[0].OpenUntil = c.closed, c.openUntil
		h := v.Hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("%s hashes as %s", c.name, prev)
		}
		seen[h] = c.name
	}
}
