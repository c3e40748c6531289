package epochbench

import (
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/market"
)

// recorder collects every peer's Match of every epoch, and the claims, for
// counting once the run is over.
type recorder struct {
	mu          sync.Mutex                        // guards everything below
	submitterOf map[string]string                 // job → its submitter
	epochs      map[uint64]map[string]epochRecord // epoch → peer → its pass
	firstClaim  map[string]uint64                 // job → the epoch of its first claim
	claims      map[uint64]map[string]int         // epoch → job → claims
}

// epochRecord is one peer's pass of one epoch.
type epochRecord struct {
	jobs     int
	delay    time.Duration
	assigned map[string]string // job → provider
}

func newRecorder() *recorder {
	return &recorder{
		submitterOf: make(map[string]string),
		epochs:      make(map[uint64]map[string]epochRecord),
		firstClaim:  make(map[string]uint64),
		claims:      make(map[uint64]map[string]int),
	}
}

func (r *recorder) declared(job, submitter string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submitterOf[job] = submitter
}

func (r *recorder) matched(epoch uint64, peer string, jobs int, delay time.Duration, as []market.Assignment, claims []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := epochRecord{jobs: jobs, delay: delay, assigned: make(map[string]string, len(as))}
	for _, a := range as {
		rec.assigned[a.Job] = a.Provider
	}
	if r.epochs[epoch] == nil {
		r.epochs[epoch] = make(map[string]epochRecord)
	}
	r.epochs[epoch][peer] = rec
	for _, j := range claims {
		if _, ok := r.firstClaim[j]; !ok {
			r.firstClaim[j] = epoch
		}
		if r.claims[epoch] == nil {
			r.claims[epoch] = make(map[string]int)
		}
		r.claims[epoch][j]++
	}
}

func (r *recorder) claimedJobs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.firstClaim)
}

// result counts over the epochs in which every peer matched (the run's last
// one may be cut short).
func (r *recorder) result(providers, submitters []*simPeer) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res Result
	res.Claimed = len(r.firstClaim)
	all := slices.Concat(providers, submitters)
	var epochs []uint64
	for e, byPeer := range r.epochs {
		if len(byPeer) == len(all) {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	var delaySum time.Duration
	var delayN int
	for _, e := range epochs {
		byPeer := r.epochs[e]
		busy := false
		for _, rec := range byPeer {
			busy = busy || rec.jobs > 0
		}
		if !busy {
			continue
		}
		first := byPeer[all[0].id.String()].delay
		for _, sp := range all {
			if byPeer[sp.id.String()].delay != first {
				res.DelaySplits++
				break
			}
		}
		for _, sp := range providers {
			d := byPeer[sp.id.String()].delay
			delaySum += d
			delayN++
			res.MaxDelay = max(res.MaxDelay, d)
		}
		for _, sp := range submitters {
			for job := range byPeer[sp.id.String()].assigned {
				if r.submitterOf[job] != sp.id.String() {
					continue
				}
				if fc, ok := r.firstClaim[job]; ok && fc <= e {
					continue // claimed in this epoch or before: not lost
				}
				res.Lost++
			}
		}
		for _, n := range r.claims[e] {
			res.Doubles += n - 1
		}
	}
	if delayN > 0 {
		res.MeanDelay = delaySum / time.Duration(delayN)
	}
	return res
}
