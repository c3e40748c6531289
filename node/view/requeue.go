package view

import (
	"crypto/sha256"
	"slices"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// avoidMark is a provider a job avoids, since the announcement at, until
// until: as the latest-signed announcement naming it (untilAt) says.
type avoidMark struct {
	provider string
	at       Stamp
	until    time.Time
	untilAt  time.Time
}

// Reannounced marks as re-announced at now the job whose signed
// declaration is raw, byte for byte, declared by signer, as AddJob would
// with that declaration decoded; known is false when the view does not
// hold those bytes from that signer, and the caller must decode and add
// them. A requeue repeats every queued job every few seconds: this keeps
// the cost of each to a hash and a lookup, not a decode.
func (v *Market) Reannounced(raw []byte, signer peer.ID, now time.Time) (known, opened bool) {
	h := sha256.Sum256(raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	id := wire.JobIDOf(h)
	if a, ok := v.arrays[id]; ok {
		if a.hash != h || a.submitter != signer {
			return false, false
		}
		v.hold.touch(signer, now)
		return true, v.refreshArrayLocked(id, a, now)
	}
	old, ok := v.jobs[id]
	if !ok || old.Hash != h || old.Submitter != signer {
		return false, false
	}
	v.hold.touch(signer, now)
	return true, v.refreshLocked(old, now)
}

// refreshLocked marks a job held re-announced at seen, and opens it
// again if its submitter had declined it before; it reports whether it
// opened it. The caller holds v.mu.
func (v *Market) refreshLocked(old *OpenJob, seen time.Time) bool {
	old.refreshed = seen
	if old.declined && seen.After(old.closed.Arrived) {
		old.closed, old.declined = Stamp{}, false
		v.open.add(old)
		return true
	}
	return false
}

// Decline closes a job whose submitter refused a proposal for it because it
// is no longer queued; unlike CloseJob, a later re-announcement of the job
// opens it again.
func (v *Market) Decline(id string, by peer.ID, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok && j.Submitter == by && j.closed.IsZero() {
		j.closed, j.declined = Local(now), true
		v.open.drop(j)
	}
}

// AddAvoid records that the submitter by names providers for its job id to
// avoid, each until the time until gives it, in the announcement stamped
// at. A provider named once stays named while the job is in the view,
// whatever order the announcements arrive in, and avoided until the time
// the latest-signed of them gives: Match leaves the avoid out from then on.
func (v *Market) AddAvoid(id string, by peer.ID, providers []string, until []time.Time, at Stamp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	if !ok || j.Submitter != by || len(until) != len(providers) {
		return
	}
	signed := signedOf(at)
	for k, p := range providers {
		i := slices.IndexFunc(j.avoid, func(m avoidMark) bool { return m.provider == p })
		if i < 0 {
			if len(j.avoid) < 4*wire.MaxAvoid {
				j.avoid = append(j.avoid, avoidMark{provider: p, at: at, until: until[k], untilAt: signed})
			}
			continue
		}
		m := &j.avoid[i]
		if signed.Before(signedOf(m.at)) {
			m.at = at
		}
		if signed.After(m.untilAt) {
			m.until, m.untilAt = until[k], signed
		}
	}
}
