package view

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Market is what this node knows of the jobs topic: jobs and leases,
// each with when it arrived and when it ended, so that the view of an epoch
// can be taken as it stood at the epoch's cutoff. Together with the offer
// view it is the input of Match.
type Market struct {
	// mu guards everything below. It is held only over memory, never
	// across I/O (disk, network): under it a Market calls out only to pure
	// code (market, wire, peer) and, in Current, to the caller's epochOf and
	// firstEpoch, which run with it held. epoch.Clock's First, passed as
	// firstEpoch, takes the Offers lock (it reads the offers for each
	// epoch's delay), so the order is Market, then Offers: nothing may call
	// into a Market while holding an Offers lock.
	mu     sync.Mutex
	jobs   map[string]*OpenJob
	leases map[string]*knownLease
	// closed remembers jobs that were leased or withdrawn before (or
	// without) their declaration arriving, and by whom (the submitter
	// named by the lease, or the withdrawal's signer), so that a late copy
	// of the declaration does not open them, unless the closer was not its
	// submitter; and jobs long closed, in place of their entry in jobs.
	closed map[string]closedMark
	// open counts each submitter's open jobs and tasks (open.go).
	open openCounts
	// arrays holds the arrays whose tasks are in jobs, by array ID.
	arrays arrayBook
	// jobsPeak is the most entries jobs has held since it was last made
	// anew: a Go map keeps the room it grew to, so once a burst's jobs are
	// pruned to marks, Prune copies what is left into a new one.
	jobsPeak int
	// recent holds the leases that Prune has not slimmed: those not
	// released, or released or announced less than closedBodyKeep ago,
	// which are all that any epoch's view can still count live. A pass
	// between epochs reads these rather than every lease of the usage
	// window (a busy network's hours of history).
	recent map[string]*knownLease
	// bySubmitter holds every announced lease by its submitter, for the
	// use of the submitters whose jobs are in a view.
	bySubmitter map[string]map[string]*knownLease
	// slimmedNewest is the newest signing time among the slimmed leases,
	// as of the last Prune: their part in a view's Now.
	slimmedNewest time.Time

	// hold is what each identity holds against the view's bounds, and
	// what the bounds did (holdings.go); its Bounds never change.
	hold holdings
	// seq numbers the declarations as they enter jobs (declRef).
	seq uint64
}

// closedBodyKeep is how long a job leased or withdrawn keeps its
// declaration in the view, and a released lease its devices and its place
// among the leases a pass reads (Market.recent): longer than any epoch's
// cutoff lags behind the messages that arrived before it (the epoch delay,
// at most half of MaxEpoch, plus the signing clock's allowed skew, 30s).
const closedBodyKeep = time.Minute

// MaxEpoch is the longest epoch a view supports (see closedBodyKeep).
const MaxEpoch = time.Minute

// closedMark is a job known closed whose declaration this view does not
// hold (or no longer holds): when, and by whom.
type closedMark struct {
	at Stamp
	by peer.ID
	// declared: by is the job's declarer, from a declaration this node
	// verified, not only the closer's word (see Prune).
	declared bool
}

// NewMarket returns an empty view with the default Bounds.
func NewMarket() *Market { return NewBoundedMarket(Bounds{}) }

// NewBoundedMarket returns an empty view held to b.
func NewBoundedMarket(b Bounds) *Market {
	return &Market{
		hold: newHoldings(b),

		jobs:   make(map[string]*OpenJob),
		leases: make(map[string]*knownLease),
		closed: make(map[string]closedMark),
		open:   newOpenCounts(),
		arrays: make(arrayBook),

		recent:      make(map[string]*knownLease),
		bySubmitter: make(map[string]map[string]*knownLease),
	}
}
