package market

import "slices"

// Digest is one subshard's summary, as one of its members publishes it
// for the whole network (a few hundred bytes about once a minute): how
// many providers it holds, how many GPUs are free on its boxes, how much
// work waits in it, and which large inputs its providers hold. A peer
// that reads every subshard's digest knows the shape of the whole market
// without hearing any of its offers, and routes its jobs by it (Route).
type Digest struct {
	Class Class `json:"class"`
	// Index of Count: the subshard of the class (Count 1: the class is one
	// market).
	Index int `json:"index"`
	Count int `json:"count"`
	// Providers counts the subshard's providers that take work now.
	Providers int `json:"providers"`
	// FreeBoxes[k] counts its boxes with k GPUs free; the last bucket
	// counts those with that many or more. At most MaxDigestBuckets.
	FreeBoxes []int `json:"free_boxes"`
	// Queued counts the jobs queued in it, QueuedGPUs the GPUs they ask.
	Queued     int `json:"queued"`
	QueuedGPUs int `json:"queued_gpus"`
	// OldestWait is how long its oldest queued job has waited, ms.
	OldestWait Duration `json:"oldest_wait_ms"`
	// Held lists the largest inputs its providers hold, at most
	// MaxDigestHeld, each with how many hold it.
	Held []HeldRoot `json:"held,omitempty"`
}

// HeldRoot is one input root a digest's providers hold.
type HeldRoot struct {
	Root    string `json:"root"`
	Bytes   uint64 `json:"bytes"`
	Holders int    `json:"holders"`
}

// Bounds of a digest.
const (
	MaxDigestBuckets = MaxGPUsPerBox + 1
	MaxDigestHeld    = 32
)

// FreeBoxesFor counts the digest's boxes with at least gpus GPUs free.
func (d Digest) FreeBoxesFor(gpus int) int {
	n := 0
	for k, c := range d.FreeBoxes {
		if k >= gpus {
			n += c
		}
	}
	return n
}

// Headroom is how many more jobs like r the subshard could start now: its
// boxes free enough for one node of r, less the jobs already queued in it
// (each taken to want a box), per node of r. Below zero, jobs wait there.
func (d Digest) Headroom(r Request) float64 {
	nodes := max(r.Nodes, 1)
	free := d.FreeBoxesFor(r.GPUs)
	if r.GPUs == 0 {
		free = d.Providers
	}
	return float64(free-d.Queued) / float64(nodes)
}

// heldBy counts the holders the digest lists of any of roots.
func (d Digest) heldBy(roots []string) int {
	n := 0
	for _, h := range d.Held {
		if slices.Contains(roots, h.Root) {
			n += h.Holders
		}
	}
	return n
}

// Route picks the subshard a job asking r, reading roots, is declared in,
// from the digests of the whole market, in three steps:
//
//   - Fit: the subshards whose class fits r (Class.Fits) and that hold
//     enough providers for its nodes.
//   - Smallest boxes first: of those, the ones of the smallest box size
//     band that has headroom for r, as Match in one market fills the
//     smallest box that fits first. A one-GPU job sent to an idle 8-GPU
//     class would take a GPU from a box a whole-box job or a gang needs.
//     Where no band has headroom, every fitting subshard stays: the job
//     queues somewhere it fits.
//   - The data: where any of those holds one of the job's inputs, only
//     those that do, the most holders first.
//
// Of what is left, two drawn at random (draw(n) returns a number in
// [0, n)), and of the two the one with more holders of the inputs, then
// more headroom. Two random choices, never the single best: every
// submitter reading the same digests would send its jobs to the same
// best subshard, which would fill while others idle. ok is false when no
// subshard fits.
func Route(r Request, roots []string, digests []Digest, draw func(n int) int) (Digest, bool) {
	var fit []Digest
	for _, d := range digests {
		if d.Class.Fits(r) && d.Providers >= max(r.Nodes, 1) {
			fit = append(fit, d)
		}
	}
	if band, ok := smallestRoomyBand(r, fit); ok {
		fit = slices.DeleteFunc(fit, func(d Digest) bool { return boxBandOf(d.Class) != band })
	}
	if len(roots) > 0 {
		var local []Digest
		for _, d := range fit {
			if d.heldBy(roots) > 0 && d.Headroom(r) > 0 {
				local = append(local, d)
			}
		}
		if len(local) > 0 {
			fit = local
		}
	}
	switch len(fit) {
	case 0:
		return Digest{}, false
	case 1:
		return fit[0], true
	}
	a := draw(len(fit))
	b := draw(len(fit) - 1)
	if b >= a {
		b++
	}
	ha, hb := fit[a].heldBy(roots), fit[b].heldBy(roots)
	if hb > ha || hb == ha && fit[b].Headroom(r) > fit[a].Headroom(r) {
		return fit[b], true
	}
	return fit[a], true
}

// boxBandOf orders classes by the size of their boxes: cpu first, then
// consumer cards (one or two to a box) with the 1-4 band, then 5-7, 8
// and 9+.
func boxBandOf(c Class) int {
	switch {
	case c == ClassCPU:
		return 0
	case c.Family() == "":
		return 4 // consumer cards
	}
	return c.MaxBoxGPUs()
}

// bandMargin is the least headroom a band's subshard must show to be
// preferred, and a tenth of its providers where that is more: a digest is
// up to a minute old, and a band with room for a few more jobs by it may
// be full by the time a job is declared there.
const bandMargin = 2

// smallestRoomyBand is the smallest box band among fit with a subshard
// whose headroom for r is at least its margin; ok is false where none has.
func smallestRoomyBand(r Request, fit []Digest) (band int, ok bool) {
	for _, d := range fit {
		if d.Headroom(r) < max(bandMargin, float64(d.Providers)/10) {
			continue
		}
		if b := boxBandOf(d.Class); !ok || b < band {
			band, ok = b, true
		}
	}
	return band, ok
}

// MoveAfter is how long a job waits in its subshard before its submitter
// looks for another with headroom (Move).
const MoveAfter = 2 * Minute

// Move says where a job asking r that has waited waited in the subshard
// here should go instead: another fitting subshard with headroom, drawn as
// Route draws, once the job has waited after (0: MoveAfter) and here has
// none. ok is false when it should stay.
func Move(r Request, roots []string, waited, after Duration, here Digest, digests []Digest, draw func(n int) int) (Digest, bool) {
	if after <= 0 {
		after = MoveAfter
	}
	if waited < after || here.Headroom(r) > 0 {
		return Digest{}, false
	}
	var others []Digest
	for _, d := range digests {
		if (d.Class != here.Class || d.Index != here.Index || d.Count != here.Count) && d.Headroom(r) > 0 {
			others = append(others, d)
		}
	}
	return Route(r, roots, others, draw)
}
