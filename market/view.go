package market

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
)

// GPU is one device in a provider's offer.
type GPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// Free is the provider's own word that no lease holds the device.
	Free bool `json:"free"`
}

// Offer is what a provider advertises: all of its devices, free or not, and
// its totals of CPUs and memory.
type Offer struct {
	Provider    string `json:"provider"` // peer ID
	GPUs        []GPU  `json:"gpus"`
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// Price is what an hour of one of its GPUs costs, in the network's
	// currency: a job whose request.max_price is under it is not placed
	// here, and of places that fit a job alike Match takes the cheaper.
	// 0: free.
	Price Price `json:"price,omitempty"`
	// Images says the provider can run a job in its own image; without it
	// only jobs on the host's root are matched to it.
	Images bool `json:"images,omitempty"`
	// RequireImage says the provider takes only jobs that bring an image.
	RequireImage bool `json:"require_image,omitempty"`
	// Unreachable says no peer can open a stream to the provider: it is
	// behind a NAT and holds no relay reservation. It is offered no work,
	// since no submitter could take its proposal's reply path nor send it
	// data.
	Unreachable bool `json:"unreachable,omitempty"`
	// Draining says the provider's owner is taking it back: it takes no
	// new work, and Match waits for none of its GPUs.
	Draining bool `json:"draining,omitempty"`
	// Closed says the provider is outside its contribution hours (its
	// owner lends its GPUs only at set times): it takes no new work, and
	// Match waits for none of its GPUs, which stay away until its next
	// window opens.
	Closed bool `json:"closed,omitempty"`
	// OpenUntil is when the provider's current contribution window ends,
	// in ms since the Unix epoch; 0 means it does not end. Match places a
	// job there, or reserves the provider for it, only if the job's
	// declared limit ends by then, or places a job that checkpoints there
	// to be cut at the close (window.go).
	OpenUntil int64 `json:"open_until,omitempty"`
	// MaxJobDisk is the largest request.disk the provider can grant now:
	// its own cap, or less where its disk has less room to lend beside
	// its running jobs (a provider publishes a change of it); 0 means no
	// cap.
	MaxJobDisk uint64 `json:"max_job_disk,omitempty"`
	// NoDisk says why the provider lends no disk, and so takes no job:
	// DiskFull (its free space is under the reserve it keeps) or
	// DiskUnbounded (it cannot bound what a job writes); "" while it
	// can. Match treats any value alike.
	NoDisk string `json:"no_disk,omitempty"`
	// NoCPUJobs says the provider takes only jobs that ask for GPUs: a
	// job with request.gpus 0 would hold its CPUs and memory, which its
	// GPUs' jobs need.
	NoCPUJobs bool `json:"no_cpu_jobs,omitempty"`
	// Holdings is the large content the provider has cached, which Match
	// prefers to send jobs that read it to.
	Holdings Holdings `json:"holdings,omitzero"`
}

// Why a provider lends no disk (Offer.NoDisk).
const (
	// DiskFull: the free space of the provider's data dir is under the
	// reserve it keeps for its own records and its owner.
	DiskFull = "full"
	// DiskUnbounded: the provider cannot bound what a job writes (no loop
	// devices or no mkfs.ext4), and its owner did not allow that.
	DiskUnbounded = "unbounded"
)

// Job is an open declaration as the market sees it: only what decides where
// and when it runs.
type Job struct {
	ID        string `json:"id"`
	Submitter string `json:"submitter"` // peer ID
	// SubmittedAt orders a submitter's jobs and measures their age. The node
	// should set it to the start of the epoch in which the job first entered
	// its view, not take the submitter's word, or a submitter could jump the
	// queue by backdating.
	SubmittedAt int64   `json:"submitted_at"` // ms since the Unix epoch
	Request     Request `json:"request"`
	// Image says the job runs in its own image (work.image is set), which
	// only offers with Images can hold.
	Image bool `json:"image,omitempty"`
	// Data is what the job reads, inputs and image, by root with the sizes
	// recorded at submit: what locality weighs.
	Data []Datum `json:"data,omitempty"`
	// Avoid lists providers (peer IDs) that this job must not be placed
	// on: its submitter named them, in a signed re-announcement, for
	// failing this job (see "Avoided providers" in the package doc).
	Avoid []string `json:"avoid,omitempty"`
	// Checkpoint is the job's checkpoint interval
	// (output.checkpoints.every), 0 for a job that declares none: a job
	// that checkpoints may be placed in a window shorter than its limit
	// and go on elsewhere from its checkpoint (window.go).
	Checkpoint Duration `json:"checkpoint,omitempty"`
}

// Lease is compute held for a job, announced and signed by both sides.
type Lease struct {
	ID          string   `json:"id"`
	Job         string   `json:"job"`
	Provider    string   `json:"provider"`
	Submitter   string   `json:"submitter"`
	GPUs        []string `json:"gpus"` // UUIDs
	CPUs        int      `json:"cpus"`
	MemoryBytes uint64   `json:"memory_bytes"`
	Start       int64    `json:"start"` // ms since the Unix epoch
	Limit       Duration `json:"limit"`
}

// End is when the lease must be over: limits are enforced by the provider,
// which is what lets a reservation count on it.
func (l Lease) End() int64 { return satAdd(l.Start, int64(l.Limit)) }

// Usage is a submitter's recent use, kept by the node from lease and release
// announcements (see Decay and Charge).
type Usage struct {
	Submitter string `json:"submitter"`
	GPUMillis int64  `json:"gpu_millis"`
}

// View is the state Match decides on: the open jobs, the offers, the live
// leases and the recent use, frozen for one epoch. Now must be derived from
// the epoch (its start, say), never from a local clock, so that every peer
// matching the same epoch holds the same view.
type View struct {
	Epoch  uint64  `json:"epoch"`
	Now    int64   `json:"now"` // ms since the Unix epoch
	Jobs   []Job   `json:"jobs"`
	Offers []Offer `json:"offers"`
	Leases []Lease `json:"leases"`
	Usage  []Usage `json:"usage"`
}

// Hash returns the hex SHA-256 of the view in canonical form: every
// collection sorted, duplicates dropped as Match drops them. Two views with
// the same contents in any order have the same hash. Epoch is not part of
// it; it enters the tie-break seed next to the hash.
func (v View) Hash() string {
	n := normalize(&v)
	return hex.EncodeToString(n.hash[:])
}

// normalized is a view with every collection sorted and deduplicated. It
// points into the caller's view and never changes it.
type normalized struct {
	now    int64
	jobs   []*Job
	offers []*Offer
	gpus   [][]*GPU // per offer, sorted by index then UUID, usable devices only
	leases []*Lease
	lgpus  [][]string // per lease, sorted UUIDs
	usage  []*Usage
	hash   [32]byte
}

// normalize sorts and deduplicates. Where two entries share a key (a job ID,
// a provider, a lease ID, a submitter) the one whose canonical encoding
// sorts first is kept, so that the choice does not depend on arrival order.
func normalize(v *View) *normalized {
	n := &normalized{now: v.Now}

	n.jobs = sortDedup(v.Jobs, func(a, b *Job) int { return cmp.Compare(a.ID, b.ID) }, appendJob)
	n.offers = sortDedup(v.Offers, func(a, b *Offer) int { return cmp.Compare(a.Provider, b.Provider) }, func(b []byte, o *Offer) []byte {
		return appendOffer(b, o, sortedGPUs(o))
	})
	n.gpus = make([][]*GPU, len(n.offers))
	for i, o := range n.offers {
		n.gpus[i] = sortedGPUs(o)
	}
	n.leases = sortDedup(v.Leases, func(a, b *Lease) int { return cmp.Compare(a.ID, b.ID) }, func(b []byte, l *Lease) []byte {
		return appendLease(b, l, sortedStrings(l.GPUs))
	})
	n.lgpus = make([][]string, len(n.leases))
	for i, l := range n.leases {
		n.lgpus[i] = sortedStrings(l.GPUs)
	}
	n.usage = sortDedup(v.Usage, func(a, b *Usage) int { return cmp.Compare(a.Submitter, b.Submitter) }, appendUsage)

	w := newHashWriter(len(n.jobs) + len(n.offers) + len(n.leases) + len(n.usage))
	w.buf = append(w.buf, "e31/view/v1"...)
	w.buf = appendInt(w.buf, v.Now)
	w.buf = appendUint(w.buf, uint64(len(n.jobs)))
	for _, j := range n.jobs {
		w.buf = appendJob(w.buf, j)
		w.flush(false)
	}
	w.buf = appendUint(w.buf, uint64(len(n.offers)))
	for i, o := range n.offers {
		w.buf = appendOffer(w.buf, o, n.gpus[i])
		w.flush(false)
	}
	w.buf = appendUint(w.buf, uint64(len(n.leases)))
	for i, l := range n.leases {
		w.buf = appendLease(w.buf, l, n.lgpus[i])
		w.flush(false)
	}
	w.buf = appendUint(w.buf, uint64(len(n.usage)))
	for _, u := range n.usage {
		w.buf = appendUsage(w.buf, u)
		w.flush(false)
	}
	w.flush(true)
	w.h.Sum(n.hash[:0])
	return n
}

// sortDedup returns pointers to the elements of s sorted by key, keeping for
// each key the element whose encoding is smallest. Encodings are built only
// for the rare equal keys.
func sortDedup[T any](s []T, key func(a, b *T) int, enc func([]byte, *T) []byte) []*T {
	ps := make([]*T, len(s))
	for i := range s {
		ps[i] = &s[i]
	}
	// Views are often assembled in key order already; a check that stops at
	// the first pair out of order costs less than the sort it saves.
	if slices.IsSortedFunc(ps, func(a, b *T) int {
		if c := key(a, b); c != 0 {
			return c
		}
		return -1 // a repeated key counts as out of order
	}) {
		return ps
	}
	slices.SortFunc(ps, func(a, b *T) int {
		if c := key(a, b); c != 0 {
			return c
		}
		return bytes.Compare(enc(nil, a), enc(nil, b))
	})
	return slices.CompactFunc(ps, func(a, b *T) bool { return key(a, b) == 0 })
}

// sortedGPUs returns the devices of o that can be leased (those with a
// UUID, since a lease names devices by UUID), sorted by index then UUID,
// each UUID once.
func sortedGPUs(o *Offer) []*GPU {
	gs := make([]*GPU, 0, len(o.GPUs))
	for i := range o.GPUs {
		if o.GPUs[i].UUID != "" {
			gs = append(gs, &o.GPUs[i])
		}
	}
	slices.SortFunc(gs, func(a, b *GPU) int {
		if c := cmp.Compare(a.Index, b.Index); c != 0 {
			return c
		}
		if c := cmp.Compare(a.UUID, b.UUID); c != 0 {
			return c
		}
		return bytes.Compare(appendGPU(nil, a), appendGPU(nil, b))
	})
	// A UUID listed twice is one device: keep its first listing. Offers hold
	// a handful of devices, where a scan beats a map; a map keeps an
	// oversized offer from costing quadratic time.
	out := gs[:0]
	var seen map[string]bool
	if len(gs) > 16 {
		seen = make(map[string]bool, len(gs))
	}
	for _, g := range gs {
		dup := false
		if seen != nil {
			dup = seen[g.UUID]
			seen[g.UUID] = true
		} else {
			for _, h := range out {
				if h.UUID == g.UUID {
					dup = true
					break
				}
			}
		}
		if !dup {
			out = append(out, g)
		}
	}
	return out
}

// sortedStrings returns s sorted without repeats, s itself when it already
// is (the usual case), since the caller only reads it.
func sortedStrings(s []string) []string {
	if slices.IsSortedFunc(s, func(a, b string) int {
		if a == b {
			return -1 // a repeat counts as out of order
		}
		return cmp.Compare(a, b)
	}) {
		return s
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// hashWriter feeds a hash through a buffer so that the view is encoded
// without one allocation per field.
type hashWriter struct {
	h   hash.Hash
	buf []byte
}

// hashFlush is how much a hashWriter gathers before hashing it.
const hashFlush = 60 << 10

// newHashWriter returns a hashWriter for a view of items jobs, offers,
// leases and usages. Its buffer is sized for the view, up to what a flush
// takes: passes between epochs run on every announcement, over a few
// items, and a buffer of a large view's size for each was a third of what
// a busy daemon allocated.
func newHashWriter(items int) *hashWriter {
	size := min(max(256*(items+1), 4<<10), hashFlush+4<<10)
	return &hashWriter{h: sha256.New(), buf: make([]byte, 0, size)}
}

func (w *hashWriter) flush(force bool) {
	if force || len(w.buf) >= hashFlush {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func appendUint(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func appendInt(b []byte, v int64) []byte   { return appendUint(b, uint64(v)) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendRequest(b []byte, r *Request) []byte {
	b = appendInt(b, int64(r.GPUs))
	b = appendString(b, r.GPUModel)
	b = appendUint(b, uint64(r.GPUMemory))
	b = appendInt(b, int64(r.CPUs))
	b = appendUint(b, uint64(r.Memory))
	return appendInt(b, int64(r.Limit))
}

func appendJob(b []byte, j *Job) []byte {
	b = append(b, 'J')
	b = appendString(b, j.ID)
	b = appendString(b, j.Submitter)
	b = appendInt(b, j.SubmittedAt)
	b = appendRequest(b, &j.Request)
	b = appendBool(b, j.Image)
	if hasLocality(j) {
		// Only jobs that say something about locality carry it, so that
		// views without any hash as they always have.
		b = appendJobData(b, j)
	}
	if len(j.Avoid) > 0 {
		// Only a job that avoids someone carries the tag, so that views
		// without avoid lists hash as they always have.
		avoid := sortedStrings(j.Avoid)
		b = append(b, 'A')
		b = appendUint(b, uint64(len(avoid)))
		for _, p := range avoid {
			b = appendString(b, p)
		}
	}
	if j.Request.Nodes != 0 {
		// Likewise only a part of a gang (or a job that says it runs on
		// one node) carries its node count.
		b = append(b, 'G')
		b = appendInt(b, int64(j.Request.Nodes))
	}
	if j.Checkpoint != 0 {
		// Likewise only a job that checkpoints carries its interval.
		b = append(b, 'R')
		b = appendInt(b, int64(j.Checkpoint))
	}
	if j.Request.MaxPrice != 0 {
		// Likewise only a job with a cap carries it.
		b = append(b, 'M')
		b = appendInt(b, int64(j.Request.MaxPrice))
	}
	return b
}

func appendGPU(b []byte, g *GPU) []byte {
	b = appendInt(b, int64(g.Index))
	b = appendString(b, g.UUID)
	b = appendString(b, g.Model)
	b = appendUint(b, g.MemoryBytes)
	return appendBool(b, g.Free)
}

func appendOffer(b []byte, o *Offer, gpus []*GPU) []byte {
	if o.Unreachable {
		// A tag of its own rather than a field, so that views of reachable
		// providers hash as they always have.
		b = append(b, 'N')
	}
	if o.Draining {
		b = append(b, 'D') // likewise
	}
	if o.Closed {
		b = append(b, 'C') // likewise
	}
	if o.OpenUntil != 0 {
		b = append(b, 'W') // likewise, then the instant
		b = appendInt(b, o.OpenUntil)
	}
	if o.MaxJobDisk != 0 {
		b = append(b, 'K') // likewise, then the cap
		b = appendUint(b, o.MaxJobDisk)
	}
	if o.NoDisk != "" {
		b = append(b, 'F') // likewise, then why
		b = appendString(b, o.NoDisk)
	}
	if o.NoCPUJobs {
		b = append(b, 'P') // likewise
	}
	if o.Price != 0 {
		b = append(b, 'Q') // likewise, then the price
		b = appendInt(b, int64(o.Price))
	}
	b = append(b, 'O')
	b = appendString(b, o.Provider)
	b = appendInt(b, int64(o.CPUs))
	b = appendUint(b, o.MemoryBytes)
	b = appendBool(b, o.Images)
	b = appendBool(b, o.RequireImage)
	b = appendUint(b, uint64(len(gpus)))
	for _, g := range gpus {
		b = appendGPU(b, g)
	}
	if !o.Holdings.IsZero() {
		b = appendHoldings(b, &o.Holdings)
	}
	return b
}

func appendLease(b []byte, l *Lease, gpus []string) []byte {
	b = append(b, 'L')
	b = appendString(b, l.ID)
	b = appendString(b, l.Job)
	b = appendString(b, l.Provider)
	b = appendString(b, l.Submitter)
	b = appendUint(b, uint64(len(gpus)))
	for _, g := range gpus {
		b = appendString(b, g)
	}
	b = appendInt(b, int64(l.CPUs))
	b = appendUint(b, l.MemoryBytes)
	b = appendInt(b, l.Start)
	return appendInt(b, int64(l.Limit))
}

func appendUsage(b []byte, u *Usage) []byte {
	b = append(b, 'U')
	b = appendString(b, u.Submitter)
	return appendInt(b, u.GPUMillis)
}

// seedFor derives the tie-break seed H(epoch ‖ view hash): the same on
// every peer that holds the view, different from one epoch to the next so
// that no provider or submitter wins every tie forever.
func seedFor(epoch uint64, viewHash [32]byte) [32]byte {
	b := make([]byte, 0, 64)
	b = append(b, "e31/seed/v1"...)
	b = appendUint(b, epoch)
	b = append(b, viewHash[:]...)
	return sha256.Sum256(b)
}

func satAdd(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	return s
}

func satAddUint(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<64 - 1
}
