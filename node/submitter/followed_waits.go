package submitter

import (
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// NoteFollowedWaits records why this node's queued jobs wait, as a pass
// of Match on the view of a market the node only follows says: the
// reason it gives, or the provider it matched the job to. Unlike
// RecordWaits it counts no pass of this node's own: assignments there
// are judged when a proposal comes (claims.go), and a round is lost or a
// provider squats only by this node's epoch passes.
func (k *kit) NoteFollowedWaits(res market.Result) {
	mine := k.jobs.live()
	waits := make(map[*jobTracker][]string)
	for _, w := range res.Waiting {
		if j, ok := mine[w.Job]; ok {
			waits[j] = append(waits[j], w.Reason)
		}
	}
	for _, a := range res.Assignments {
		if j, ok := mine[a.Job]; ok {
			waits[j] = append(waits[j], matchedWait(a.Provider))
		}
	}
	for j, ws := range waits {
		(failureWatch{j}).noteWaits(ws)
	}
}

// noteWaits records the reasons a pass gave for the queued job's wait,
// the last one standing, as notePass does, without counting the pass.
func (j failureWatch) noteWaits(waits []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != api.JobQueued {
		return
	}
	j.setWaitsLocked(waits)
}

// setWaitsLocked sets the job's wait to each of waits in turn (each a
// change a follower hears of), a provider's matched wait replaced by what
// this node learnt of the provider since. The caller holds j.mu.
func (j failureWatch) setWaitsLocked(waits []string) {
	for _, why := range waits {
		for p, note := range j.notes {
			if why == matchedWait(p) {
				why = note
			}
		}
		if j.rec.Wait != why {
			j.rec.Wait = why
			j.bump()
		}
	}
}
