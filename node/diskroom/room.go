package diskroom

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
	"golang.org/x/sys/unix"
)

// ErrNoRoom is wrapped by Hold's and ContentRoom's refusals: the disk has
// no room for what was asked beside its reserve and what its jobs may
// still take.
var ErrNoRoom = errors.New("no room on the data dir's disk")

// Options say how much of the data dir's filesystem a Room lends. Zero
// sizes take the defaults, which depend on the filesystem's size.
type Options struct {
	// Dir is the data dir, whose filesystem is measured.
	Dir string
	// Reserve is the free space no job's disk, input, output or
	// checkpoint may take: the node's own records write into it, and the
	// machine's owner keeps it. 0: DefaultReserve of the filesystem's
	// size, or RecordsReserve where NoJobs.
	Reserve uint64
	// NoJobs says the node runs no jobs (it only submits): its reserve
	// then need only keep its own records writable, not its owner's
	// machine from strangers' jobs.
	NoJobs bool
	// MaxJobDisk is the largest request.disk a job may have here. 0:
	// DefaultMaxJobDisk of the filesystem's size.
	MaxJobDisk uint64
	// NoQuotas, when set, says why a job's disk cannot be bounded here
	// (exec.DiskSupport): the room then lends nothing (market.DiskUnbounded)
	// unless Unbounded is set.
	NoQuotas  error
	Unbounded bool
	// Free, when set, is counted as the filesystem's size and free space,
	// whatever it holds: a test network whose nodes share one filesystem
	// of whatever size the machine has, and whose jobs ask for disks they
	// never fill, grants them all alike on every machine.
	Free uint64
	// Changed is called when what the offer says of the disk changes
	// (Offered); it must not block.
	Changed func()
	Log     *slog.Logger
}

// DefaultReserve is the reserve of a filesystem of size bytes: a tenth of
// it, and at least 20 GiB, for the node's stores to grow for months and
// the machine's owner to go on with their day; but never more than a
// quarter of it, so that a small disk still lends something.
func DefaultReserve(size uint64) uint64 {
	return min(max(size/10, 20*market.GiB), size/4)
}

// RecordsReserve is the reserve of a node that runs no jobs, on a
// filesystem of size bytes: what its own records need, a GiB or a
// hundredth of the filesystem, the larger, and never more than
// DefaultReserve. Only its own fetches (its jobs' outputs) are held to it.
func RecordsReserve(size uint64) uint64 {
	return min(max(size/100, market.GiB), DefaultReserve(size))
}

// DefaultMaxJobDisk is the largest request.disk taken on a filesystem of
// size bytes, by default: a quarter of it, so that one stranger's job
// never asks for the whole machine, rounded down to a MiB.
func DefaultMaxJobDisk(size uint64) uint64 {
	return max(size/4/market.MiB*market.MiB, market.MinDisk)
}

// Need is what one job may take of the disk, in bytes.
type Need struct {
	// Disk is the job's request.disk; its image may take up to
	// exec.DiskCost of it on the host.
	Disk uint64
	// Output is what importing its output may take, until it is
	// imported.
	Output uint64
	// Inputs is what staging its inputs may take, until they are staged.
	Inputs uint64
}

// NeedOf is the Need of a job that asks for disk bytes and declares
// inputs bytes of inputs and image: the output is at most the disk and the
// logs, and inputs are fetched into the store, then laid out as files.
func NeedOf(disk, inputs uint64) Need {
	return Need{Disk: disk, Output: disk + 2*uint64(exec.DefaultLogCap), Inputs: 2 * inputs}
}

// Total is the most the need can take of the disk while none of it is
// written.
func (n Need) Total() uint64 {
	return satAdd(satAdd(exec.DiskCost(n.Disk), n.Output), n.Inputs)
}

// Status is how the room stands, for e31 id and e31d doctor.
type Status struct {
	// Size and Free are the filesystem's, as last measured.
	Size, Free uint64
	// Reserve is what is kept free; Promised what the granted jobs may
	// still take.
	Reserve, Promised uint64
	// Lendable is what is left to lend: Free less Reserve and Promised.
	Lendable uint64
	// MaxJobDisk is the largest request.disk this node can grant now (0
	// where NoDisk is set), within Cap, the largest it takes at all.
	MaxJobDisk, Cap uint64
	// NoDisk says why it lends none (market.DiskFull, DiskUnbounded), and
	// Why in words; "" where it lends.
	NoDisk, Why string
	// Jobs is how many jobs hold a grant.
	Jobs int
}

// Room is the disk a provider lends its jobs (see the package doc). Its
// methods are safe for concurrent use.
type Room struct {
	// Set by Open, never changed.
	o        Options
	size     uint64
	reserve  uint64
	cap      uint64
	spare    string
	spareLen uint64
	statfs   func(dir string) (size, free uint64, err error)
	log      *slog.Logger

	// mu guards the fields below. A state lock: never held across I/O, the
	// measures of the disk included (sample).
	mu     sync.Mutex
	grants map[string]*grant
	last   Status // as of the last measure; what Offered says
}

// grant is the room one job holds: from its proposal (signed false, keyed
// by the job) and, once its lease is signed, under the lease's ID.
type grant struct {
	need   Need
	image  string // its disk's image, once the lease is signed
	signed bool
}

// Open measures the data dir's filesystem and sets the defaults. The
// directory must exist.
func Open(o Options) (*Room, error) {
	measure := statfs
	if o.Free != 0 {
		free := o.Free
		measure = func(string) (uint64, uint64, error) { return free, free, nil }
	}
	return open(o, measure)
}

// open is Open with the filesystem measured by measure.
func open(o Options, measure func(dir string) (size, free uint64, err error)) (*Room, error) {
	r := &Room{o: o, grants: map[string]*grant{}, statfs: measure, log: cmp.Or(o.Log, slog.New(slog.DiscardHandler))}
	return r, r.init()
}

// init reads the filesystem's size and sets what depends on it.
func (r *Room) init() error {
	size, free, err := r.statfs(r.o.Dir)
	if err != nil {
		return fmt.Errorf("measure the data dir's disk: %w", err)
	}
	r.size = size
	r.reserve = r.o.Reserve
	switch {
	case r.reserve != 0:
	case r.o.NoJobs:
		r.reserve = RecordsReserve(size)
	default:
		r.reserve = DefaultReserve(size)
	}
	r.cap = cmp.Or(r.o.MaxJobDisk, DefaultMaxJobDisk(size))
	r.spare = filepath.Join(r.o.Dir, spareName)
	r.spareLen = min(spareMax, size/64)
	r.mu.Lock()
	r.last = r.compute(sample{size: size, free: free})
	r.mu.Unlock()
	return nil
}

// Reserve is the free space the room keeps.
func (r *Room) Reserve() uint64 { return r.reserve }

// statfs measures the filesystem holding dir: its size, and what an
// unprivileged writer may still take of it.
func statfs(dir string) (size, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// sample is one measure of the disk: the filesystem's size and free
// space, and what each granted disk's image has allocated.
type sample struct {
	size, free uint64
	alloc      map[string]uint64
}

// sample measures the disk, outside the lock. The images are measured
// before the filesystem: a job that writes between the two is then
// counted twice, never not at all.
func (r *Room) sample() (sample, error) {
	r.mu.Lock()
	var images []string
	for _, g := range r.grants {
		if g.image != "" {
			images = append(images, g.image)
		}
	}
	r.mu.Unlock()
	s := sample{alloc: allocatedOf(images)}
	var err error
	s.size, s.free, err = r.statfs(r.o.Dir)
	return s, err
}

// allocatedOf is what each file of paths takes on its filesystem: its
// allocated blocks, whatever its size says. A file not there takes none.
func allocatedOf(paths []string) map[string]uint64 {
	out := make(map[string]uint64, len(paths))
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				out[p] = uint64(sys.Blocks) * 512
			}
		}
	}
	return out
}

// disk is what a grant's disk may still take, by s.
func (g *grant) disk(s sample) uint64 {
	return satSub(exec.DiskCost(g.need.Disk), s.alloc[g.image])
}

// promised is what the grants may still take, by s: all of them, and those
// of signed leases only. The caller holds mu.
func (r *Room) promised(s sample) (all, signed, disks uint64) {
	for _, g := range r.grants {
		d := g.disk(s)
		n := satAdd(satAdd(d, g.need.Output), g.need.Inputs)
		all, disks = satAdd(all, n), satAdd(disks, d)
		if g.signed {
			signed = satAdd(signed, n)
		}
	}
	return all, signed, disks
}

// compute is the status by s. The caller holds mu.
func (r *Room) compute(s sample) Status {
	all, signed, _ := r.promised(s)
	st := Status{Size: s.size, Free: s.free, Reserve: r.reserve, Promised: all, Cap: r.cap, Jobs: len(r.grants)}
	st.Lendable = satSub(s.free, satAdd(r.reserve, all))
	switch {
	case r.o.NoQuotas != nil && !r.o.Unbounded:
		st.NoDisk = market.DiskUnbounded
		st.Why = fmt.Sprintf("a job's disk cannot be bounded here (%v); e31d --unbounded-disk lends the disk all the same", r.o.NoQuotas)
		return st
	case s.free < r.reserve:
		st.NoDisk = market.DiskFull
		st.Why = fmt.Sprintf("%s free, under the %s kept in reserve", size(s.free), size(r.reserve))
		return st
	}
	// The offer counts only the signed leases: a proposal in flight
	// changes it once, with its lease, as the GPUs' state does.
	if q := largestFor(satSub(s.free, satAdd(r.reserve, signed))); q >= market.MinDisk {
		st.MaxJobDisk = min(q, r.cap)
		return st
	}
	st.NoDisk = market.DiskFull
	st.Why = fmt.Sprintf("%s free: the %s kept in reserve and the %s promised to running jobs leave too little for a job's disk",
		size(s.free), size(r.reserve), size(all))
	return st
}

// largestFor is the largest request.disk whose Need fits in lendable
// bytes, rounded down to three significant bits of MiB (…, 8, 10, 12, 14,
// 16, 20, 24, 28, 32 GiB …): offers change, and are published again, only
// when the change matters, and providers whose figures are close count
// as the same shape for Match.
func largestFor(lendable uint64) uint64 {
	fixed := NeedOf(0, 0).Total()
	if lendable <= fixed {
		return 0
	}
	// The Need of q is about 2q + q/16 and the fixed part.
	q := (lendable - fixed) / 33 * 16 / market.MiB
	for q > 0 && NeedOf(q*market.MiB, 0).Total() > lendable {
		q--
	}
	if n := bits.Len64(q); n > 3 {
		q = q >> (n - 3) << (n - 3)
	}
	return q * market.MiB
}

// Offered is what the offer says of the disk now: the largest request.disk
// it can grant, or why it lends none. It reads what Watch and the grants
// last measured, with no I/O.
func (r *Room) Offered() (maxJobDisk uint64, noDisk string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last.MaxJobDisk, r.last.NoDisk
}

// Status is how the room stood at its last measure.
func (r *Room) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Hold grants a job its disk under key (the job's ID) if the disk has
// room for need beside its reserve and every grant already made, and
// fails wrapping ErrNoRoom otherwise, saying why. A key held already is
// held again with need.
func (r *Room) Hold(key string, need Need) error {
	if need.Disk > r.cap {
		return fmt.Errorf("%w: request.disk %s is above the %s this node takes", ErrNoRoom, size(need.Disk), size(r.cap))
	}
	s, err := r.sample()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoRoom, err)
	}
	r.mu.Lock()
	delete(r.grants, key)
	all, _, _ := r.promised(s)
	st := r.compute(s)
	switch {
	case st.NoDisk == market.DiskUnbounded:
		err = fmt.Errorf("%w: %s", ErrNoRoom, st.Why)
	case s.free < satAdd(satAdd(r.reserve, all), need.Total()):
		err = fmt.Errorf("%w: a job asking %s may take %s; %s free, %s kept in reserve, %s promised to other jobs",
			ErrNoRoom, size(need.Disk), size(need.Total()), size(s.free), size(r.reserve), size(all))
	default:
		r.grants[key] = &grant{need: need}
	}
	r.mu.Unlock()
	if err != nil {
		// The offer that drew the job here may say more than is left.
		r.update(s)
	}
	return err
}

// Signed moves the grant held under key to the signed lease, whose disk
// image is image (exec.DiskImage of its folder).
func (r *Room) Signed(key, lease, image string) {
	r.mu.Lock()
	if g, ok := r.grants[key]; ok {
		delete(r.grants, key)
		g.image, g.signed = image, true
		r.grants[lease] = g
	}
	r.mu.Unlock()
	r.Refresh()
}

// Drop gives back what key holds: a proposal that came to nothing.
func (r *Room) Drop(key string) {
	r.mu.Lock()
	_, ok := r.grants[key]
	delete(r.grants, key)
	r.mu.Unlock()
	if ok {
		r.Refresh()
	}
}

// Staged says the lease's inputs are in place: they are on the disk now,
// and no longer promised.
func (r *Room) Staged(lease string) { r.done(lease, func(n *Need) { n.Inputs = 0 }) }

// Imported says the lease's output is in the store, or never will be.
func (r *Room) Imported(lease string) { r.done(lease, func(n *Need) { n.Output = 0 }) }

func (r *Room) done(lease string, f func(*Need)) {
	r.mu.Lock()
	if g, ok := r.grants[lease]; ok {
		f(&g.need)
	}
	r.mu.Unlock()
}

// Release gives back everything the lease held, once its disk is gone.
func (r *Room) Release(lease string) { r.Drop(lease) }

// ContentRoom says whether the content store may write n more bytes: the
// free space after them must cover the reserve and what the jobs' disks
// may still take. An import or fetch a grant counted is written out of the
// room that grant holds, beside the disks; one no grant counted (a
// checkpoint, a prestage, a submitter's fetch) out of what is left.
func (r *Room) ContentRoom(n int64) error {
	s, err := r.sample()
	if err != nil {
		return err
	}
	r.mu.Lock()
	_, _, disks := r.promised(s)
	r.mu.Unlock()
	if s.free < satAdd(satAdd(r.reserve, disks), uint64(max(n, 0))) {
		return fmt.Errorf("%w: %s to write, %s free, %s kept in reserve, %s promised to jobs' disks",
			ErrNoRoom, size(uint64(max(n, 0))), size(s.free), size(r.reserve), size(disks))
	}
	return nil
}

// Refresh measures the disk again and, where what the offer says changes,
// tells Options.Changed. It returns the new status.
func (r *Room) Refresh() Status {
	s, err := r.sample()
	if err != nil {
		r.log.Warn("measure the data dir's disk", "err", err)
		return r.Status()
	}
	return r.update(s)
}

// update sets the status by s, and tells of a change of what the offer
// says.
func (r *Room) update(s sample) Status {
	r.mu.Lock()
	was := r.last
	r.last = r.compute(s)
	now := r.last
	r.mu.Unlock()
	if was.MaxJobDisk != now.MaxJobDisk || was.NoDisk != now.NoDisk {
		if r.o.Changed != nil {
			r.o.Changed()
		}
	}
	if was.NoDisk != now.NoDisk {
		r.logChange(now)
	}
	return now
}

// logChange says in the log that the node lends disk again, or no more.
func (r *Room) logChange(st Status) {
	switch st.NoDisk {
	case "":
		r.log.Info("the data dir's disk has room again: taking work", "free", size(st.Free), "reserve", size(st.Reserve),
			"max_job_disk", size(st.MaxJobDisk))
	case market.DiskFull:
		r.log.Warn("no room on the data dir's disk: taking no new work until there is", "why", st.Why)
	default:
		r.log.Warn("lending no disk: taking no work", "why", st.Why)
	}
}

func size(b uint64) string { return market.Size(b).String() }

// defaultDisk is the disk a job that says nothing asks for.
const defaultDisk = uint64(market.DefaultDisk)

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<64 - 1
}

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
