package view

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Bounds are what one view holds at most, all submitters together: keys
// are free, so a bound per submitter alone lets a stranger fill every
// peer's memory, and every pass's work, with as many identities as it
// cares to make. doc.go, "Bounds", states the rule that keeps them.
type Bounds struct {
	// Jobs bounds the jobs the view holds: single jobs, array tasks and
	// gang parts, each one, open or closed with its declaration still
	// kept (closedBodyKeep). 0: DefaultJobs; negative: no bound.
	Jobs int
	// DeclarationBytes bounds the signed declarations the view holds, in
	// bytes, each counted once however many tasks or parts it makes. 0:
	// DefaultDeclarationBytes; negative: no bound.
	DeclarationBytes int64
	// NewFor is how long an identity counts as new from the first time
	// this view saw it (its first declaration, or its first offer if it
	// is a provider): new identities over their share are evicted before
	// known ones. 0: DefaultNewFor.
	NewFor time.Duration
	// SeenSince, if set, tells when this node first saw an identity other
	// than by its declarations (a provider's first offer): the earlier of
	// that and its first declaration dates it. It is called with the
	// Market's lock held (Offers.FirstSeen may be).
	SeenSince func(peer.ID) (time.Time, bool)
	// Self is this node's own identity: its jobs are never evicted from
	// its own view, nor its declarations refused, since it must match its
	// own jobs to lease them. They may take the view past the bounds by
	// at most what one submitter may hold (maxOpenJobsPerSubmitter,
	// maxOpenTasksPerSubmitter).
	Self peer.ID
}

// The default bounds, sized from BenchmarkViewMemory and
// BenchmarkPassOverFlood (doc.go, "Bounds"): a view full to both holds
// about 60 MiB of heap, 100 MiB with declarations a stranger shapes to
// cost the most heap per byte, and a pass over it costs about 0.1 s of
// CPU, most of it for the single jobs.
const (
	// DefaultJobs is room for six arrays of 10,000 tasks, or an array of
	// 50,000 and a deep queue of single jobs. An array larger than the
	// bound is refused in every view (market.MaxArrayTasks is larger): a
	// network that runs such arrays raises it (e31d --view-jobs).
	DefaultJobs = 60_000
	// DefaultDeclarationBytes is room for 128 declarations of the largest
	// size a gossip message carries, or some 10,000 of a usual size: a
	// submitter's deep queue of single jobs (maxOpenJobsPerSubmitter).
	DefaultDeclarationBytes = 8 << 20
	// DefaultNewFor is as long as the gossip's guard remembers a
	// submitter it admitted (p2p's knownFor).
	DefaultNewFor = time.Hour
)

// withDefaults fills in b's zero values.
func (b Bounds) withDefaults() Bounds {
	if b.Jobs == 0 {
		b.Jobs = DefaultJobs
	}
	if b.DeclarationBytes == 0 {
		b.DeclarationBytes = DefaultDeclarationBytes
	}
	if b.NewFor <= 0 {
		b.NewFor = DefaultNewFor
	}
	return b
}

// Reasons a declaration is refused or a job evicted (Bounded).
const (
	// BoundJobs: the view held Bounds.Jobs.
	BoundJobs = "jobs"
	// BoundBytes: the view held Bounds.DeclarationBytes.
	BoundBytes = "bytes"
	// BoundSubmitter: the submitter held its own bound of open jobs or
	// tasks (refusals only).
	BoundSubmitter = "submitter"
)

// BoundReasons lists the reasons of Bounded's counts.
func BoundReasons() []string { return []string{BoundJobs, BoundBytes, BoundSubmitter} }

// dimension is one of the two things bounded: jobs, bytes.
type dimension int

const (
	dimJobs dimension = iota
	dimBytes
	dims
)

func (d dimension) reason() string {
	if d == dimJobs {
		return BoundJobs
	}
	return BoundBytes
}
