package provider

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/state"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Submitters that do not pay their way are struck off for a while, as
// avoids do for providers: this provider proposes none of their jobs and
// signs none of their gang leases until the strike lifts. A strike comes
// of
//
//   - a lease stopped because its submitter refused, or left unanswered,
//     maxRefusedReceipts receipts in a row (the run goes on unpaid
//     otherwise);
//   - a final receipt the submitter disputed (both versions are recorded);
// The first strike of a submitter lasts strikeFor, each later one twice the
// one before, up to maxStrikeFor; they are kept in the record store, so a
// restart does not forgive them, and `e31 peers` lists them.
//
// A gang part whose gang lease its submitter never sent in time (this node
// held the part's GPUs for it meanwhile, which the submitter owes) is a
// lapse, not a strike: one part's provider cannot tell a submitter that
// never sent the lease from another part's provider that never signed it,
// and the submitter avoids such a provider. After maxGangLapses lapses in a
// row, though, the submitter's gang parts are taken no more until the
// last strike's time has passed, as for any strike.

// How long strikes last.
const (
	strikeFor    = 5 * time.Minute
	maxStrikeFor = 24 * time.Hour
)

// maxRefusedReceipts is how many receipts in a row a submitter may refuse,
// or leave unanswered on an open stream, before the provider stops the
// lease. A submitter that cannot be reached at all is away, not refusing:
// the run goes on, and its receipts wait for it.
const maxRefusedReceipts = 3

// maxGangLapses is how many of a submitter's gangs in a row may never
// start, their gang lease never sent, before this node takes no more of
// its gang parts for a while.
const maxGangLapses = 2

// maxStruck bounds the submitters a provider keeps strikes of: past it the
// strike that lifts first is forgotten.
const maxStruck = 4096

// Strike is what a provider holds against a submitter.
type Strike struct {
	Submitter string    `json:"submitter"`
	Count     int       `json:"count"` // strikes so far
	Until     time.Time `json:"until"` // when the last lifts
	Why       string    `json:"why"`   // the last one's reason
	// GangLapses counts the submitter's gangs in a row whose gang lease
	// never came; GangUntil is when a strike for them lifts: until then
	// none of its gang parts is taken.
	GangLapses int       `json:"gang_lapses,omitempty"`
	GangUntil  time.Time `json:"gang_until,omitzero"`
}

// strikes are the submitters struck off, by peer ID, kept in the record
// store. The role and every lease's runner share one (env.strikes).
type strikes struct {
	records Records // immutable
	log     *slog.Logger

	mu sync.Mutex        // guards by; a state lock, memory only: a strike is written after it
	by map[string]Strike // guarded by mu
}

// add strikes a submitter at now and returns the strike, to be persisted.
func (s *strikes) add(sub peer.ID, why string, now time.Time) Strike {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = make(map[string]Strike)
	}
	st := s.by[sub.String()]
	st.Submitter, st.Why = sub.String(), why
	st.Count++
	st.Until = now.Add(strikeLength(st.Count))
	s.by[st.Submitter] = st
	s.boundLocked()
	return st
}

// strikeLength is how long the n-th strike (from 1) lasts.
func strikeLength(n int) time.Duration {
	d := strikeFor
	for i := 1; i < n && d < maxStrikeFor; i++ {
		d *= 2
	}
	return min(d, maxStrikeFor)
}

// lapse notes one of sub's gangs that never started at now, and returns
// the record, to be persisted: at maxGangLapses in a row its gang parts
// are struck off, as long as its next strike would last.
func (s *strikes) lapse(sub peer.ID, gang string, now time.Time) Strike {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = make(map[string]Strike)
	}
	st := s.by[sub.String()]
	st.Submitter = sub.String()
	st.GangLapses++
	if st.GangLapses >= maxGangLapses {
		st.Count++
		st.Why = fmt.Sprintf("%d gangs in a row never started, the last %s: their gang lease never came", st.GangLapses, gang)
		st.GangUntil = now.Add(strikeLength(st.Count))
		st.GangLapses = 0
	}
	s.by[st.Submitter] = st
	s.boundLocked()
	return st
}

// gangStarted notes that one of sub's gangs started here: its lapses are
// no longer in a row.
func (s *strikes) gangStarted(sub string) (Strike, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.by[sub]
	if !ok || st.GangLapses == 0 {
		return Strike{}, false
	}
	st.GangLapses = 0
	s.by[sub] = st
	return st, true
}

// boundLocked forgets the strike that lifts first while more than
// maxStruck are kept. The caller holds s.mu.
func (s *strikes) boundLocked() {
	for len(s.by) > maxStruck {
		first := slices.MinFunc(slices.Collect(maps.Values(s.by)), func(a, b Strike) int { return a.lifts().Compare(b.lifts()) })
		delete(s.by, first.Submitter)
	}
}

// lifts is when the last of the strike's bars lifts.
func (st Strike) lifts() time.Time {
	if st.GangUntil.After(st.Until) {
		return st.GangUntil
	}
	return st.Until
}

// gangStruck reports whether sub's gang parts are struck off at now.
func (s *strikes) gangStruck(sub string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.by[sub]
	return ok && now.Before(st.GangUntil)
}

// struck returns the strike against sub in force at now.
func (s *strikes) struck(sub string, now time.Time) (Strike, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.by[sub]
	return st, ok && now.Before(st.Until)
}

// all returns the strikes known, in force or not, by submitter.
func (s *strikes) all() []Strike {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.by))
	slices.SortFunc(out, func(a, b Strike) int { return b.Until.Compare(a.Until) })
	return out
}

// load puts back a strike read from the store.
func (s *strikes) load(st Strike) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = make(map[string]Strike)
	}
	s.by[st.Submitter] = st
}

// strike strikes a submitter off for a while, logs why and persists it.
func (s *strikes) strike(sub peer.ID, why string) {
	st := s.add(sub, why, time.Now())
	s.log.Warn("submitter struck off: no new work from it for a while", "submitter", sub, "until", st.Until, "strikes", st.Count, "why", why)
	s.save(st)
}

// gangLapsed notes, and persists, one of sub's gangs that never started
// here.
func (s *strikes) gangLapsed(sub peer.ID, gang string) {
	st := s.lapse(sub, gang, time.Now())
	if !st.GangUntil.IsZero() && st.GangLapses == 0 {
		s.log.Warn("submitter's gang parts struck off: its gangs never started", "submitter", sub, "until", st.GangUntil, "why", st.Why)
	}
	s.save(st)
}

// gangStartedBy notes, and persists, one of sub's gangs that started.
func (s *strikes) gangStartedBy(sub peer.ID) {
	if st, changed := s.gangStarted(sub.String()); changed {
		s.save(st)
	}
}

func (s *strikes) save(st Strike) {
	if err := s.records.Put(state.PrefixStrike, st.Submitter, st); err != nil {
		s.log.Warn("persist strike", "submitter", st.Submitter, "err", err)
	}
}

// Strike strikes a submitter off for a while, logs why and persists it.
func (p *Provider) Strike(sub peer.ID, why string) { p.strikes.strike(sub, why) }

// Struck returns the strike in force against a submitter, if any.
func (p *Provider) Struck(sub string, now time.Time) (Strike, bool) {
	return p.strikes.struck(sub, now)
}

// Strikes returns every strike this provider keeps, the latest to lift
// first.
func (p *Provider) Strikes() []Strike { return p.strikes.all() }

// recover loads the strikes a previous run kept.
func (s *strikes) recover() error {
	return s.records.Each(state.PrefixStrike, func(b []byte) error {
		var st Strike
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("strike record: %w", err)
		}
		s.load(st)
		return nil
	})
}
