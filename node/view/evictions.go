package view

import (
	"cmp"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
)

// BoundCounts are what a view's bounds did, and what it holds.
type BoundCounts struct {
	// Jobs and DeclarationBytes are what the view holds now.
	Jobs             int64
	DeclarationBytes int64
	// Refused counts declarations refused, Evicted jobs (tasks and parts
	// each one) evicted, by reason (BoundReasons).
	Refused map[string]uint64
	Evicted map[string]uint64
}

// Bounded returns what the view's bounds did since it was made.
func (v *Market) Bounded() BoundCounts {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hold.counts()
}

// counts are what the bounds did, and what the view holds.
func (s *holdings) counts() BoundCounts {
	c := BoundCounts{Jobs: s.held[dimJobs], DeclarationBytes: s.held[dimBytes], Refused: map[string]uint64{}, Evicted: map[string]uint64{}}
	for _, r := range BoundReasons() {
		c.Refused[r], c.Evicted[r] = s.refused[r], s.evicted[r]
	}
	return c
}

// countRefused counts a declaration refused for reason, in all and in
// this round.
func (s *holdings) countRefused(reason string) {
	s.refused[reason]++
	s.round.refused++
}

// countEvicted counts jobs of submitter evicted for reason, in all and in
// this round.
func (s *holdings) countEvicted(reason string, submitter peer.ID, jobs int) {
	s.evicted[reason] += uint64(jobs)
	s.round.evicted[submitter] += jobs
}

// Eviction is what the bounds evicted and refused since the last
// TakeEvictions.
type Eviction struct {
	// Submitters are those whose jobs were evicted, with how many, the
	// most first.
	Submitters []Evicted
	// Refused counts the declarations refused.
	Refused int
}

// Evicted is one submitter's jobs evicted.
type Evicted struct {
	Submitter peer.ID
	Jobs      int
}

// Jobs is how many jobs were evicted in all.
func (e Eviction) Jobs() int {
	n := 0
	for _, s := range e.Submitters {
		n += s.Jobs
	}
	return n
}

// evictionRound is what an Eviction is made from.
type evictionRound struct {
	evicted map[peer.ID]int
	refused int
}

// TakeEvictions returns what the bounds evicted and refused since it was
// last called, and starts again: the node logs it once a pass, not once a
// job, since under a flood a job is evicted for every one declared.
func (v *Market) TakeEvictions() Eviction {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hold.takeEvictions()
}

// takeEvictions is TakeEvictions' round, taken and started again.
func (s *holdings) takeEvictions() Eviction {
	e := Eviction{Refused: s.round.refused}
	for id, n := range s.round.evicted {
		e.Submitters = append(e.Submitters, Evicted{Submitter: id, Jobs: n})
	}
	slices.SortFunc(e.Submitters, func(a, b Evicted) int {
		return cmp.Or(cmp.Compare(b.Jobs, a.Jobs), cmp.Compare(a.Submitter, b.Submitter))
	})
	s.round = evictionRound{evicted: map[peer.ID]int{}}
	return e
}
