package epoch

import (
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// Actions are what a node does with a Match result, one method a step of
// Carry. The node's act on its submitter, its provider and its history; the
// epoch benchmark's count what each peer's pass decided. Carry calls them
// from the loop's goroutine, one at a time: each must return promptly,
// leaving anything slow (a proposal's round trip, a fetch) to goroutines of
// its own.
type Actions interface {
	// RecordWaits tells the submitter why each of its queued jobs waits.
	RecordWaits(res market.Result)
	// RecordReservations tells the submitter which provider Match
	// reserved for each of its queued jobs.
	RecordReservations(res market.Result)
	// Prestage gives the provider the reservations that name it, none
	// included: it stages those jobs' inputs before a lease and stops
	// staging for jobs no longer reserved for it.
	Prestage(reserved []market.Reservation)
	// RecordMatch keeps the pass for inspection (GET /v1/matches).
	RecordMatch(m api.Match)
	// Propose makes the provider propose a lease for an assignment that
	// names it, under the epoch and view hash the lease will carry.
	Propose(a market.Assignment, epoch uint64, viewHash string)
}

// Pass is what one Match ran on.
type Pass struct {
	// Epoch is the epoch whose rules the pass matched with: for a pass
	// between epochs, the epoch it runs in.
	Epoch uint64
	// Jobs counts the open jobs in the pass's view.
	Jobs int
	// Delay is the epoch delay the view was cut with; zero for a pass
	// between epochs, whose view is not cut.
	Delay time.Duration
	// Fast marks a pass between epochs (FastPath), on the view as it stood
	// on this node, rather than an epoch's frozen view.
	Fast bool
	// Cut is how long cutting the view took, and Took how long Match took
	// on it: what one pass costs this node.
	Cut, Took time.Duration
}

// Carry carries out res, the Match of pass, on the node self (its peer ID),
// in this order:
//
//  1. RecordWaits: the submitter's queued jobs say why they wait.
//  2. RecordReservations: the submitter learns which provider is reserved
//     for each of its queued jobs. Before step 3: a node that is both a
//     job's submitter and its reserved provider asks its own submitter to
//     stage the inputs, which grants that only to the provider it has on
//     record.
//  3. Prestage, with the reservations naming self: every epoch, none
//     included, so that staging for a job no longer reserved here stops.
//  4. RecordMatch: the pass is in the history before any proposal made
//     from it, so a lease can always be traced to a Match on record.
//  5. Propose, for each assignment naming self, in rank order. Last: a
//     proposal takes the provider's GPUs and is the one step other peers
//     act on (the submitter answers it, the lease is announced), so
//     everything this node records of the pass is in place before it.
//
// A pass between epochs (Pass.Fast) skips steps 1 to 3. Its view is the
// one this node holds now, not the frozen one every peer cuts alike; what a
// job waits for, which provider is reserved for it and what that provider
// stages follow the epoch's pass, and a fast pass only lets a provider
// claim early what Match would give it now.
func Carry(act Actions, self string, pass Pass, res market.Result) {
	if !pass.Fast {
		act.RecordWaits(res)
		act.RecordReservations(res)
		act.Prestage(reservedFor(self, res))
	}
	act.RecordMatch(api.Match{Epoch: pass.Epoch, ViewHash: res.ViewHash, Jobs: pass.Jobs,
		DelayMs: pass.Delay.Milliseconds(), Assignments: res.Assignments, Fast: pass.Fast,
		CutMs: ms(pass.Cut), MatchMs: ms(pass.Took)})
	for _, a := range res.Assignments {
		if a.Provider == self {
			act.Propose(a, pass.Epoch, res.ViewHash)
		}
	}
}

// reservedFor returns the reservations of res that name provider, in rank
// order.
func reservedFor(provider string, res market.Result) []market.Reservation {
	var out []market.Reservation
	for _, r := range res.Reservations {
		if r.Provider == provider {
			out = append(out, r)
		}
	}
	return out
}

// ms is d in milliseconds, with its fraction.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
