package submitter

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Recover loads this node's jobs from the record store, so that a restart
// forgets nothing: submitted jobs are listed again and go on waiting for
// their provider, which may fetch their inputs again.
func (s *Submitter) Recover() error {
	var recs []*Record
	err := s.d.Records.Each(state.PrefixJob, func(b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("job record: %w", err)
		}
		recs = append(recs, &r)
		return nil
	})
	if err != nil {
		return err
	}
	// What each leased job's provider may fetch, worked out before the
	// records go to their trackers, and granted after the registry's lock
	// (the access list is another part).
	type grant struct {
		to    peer.ID
		roots []cid.Cid
	}
	var grants []grant
	for _, r := range recs {
		if r.terminal() || r.Lease == nil {
			continue
		}
		if p, err := peer.Decode(r.Lease.Terms.Provider); err == nil {
			grants = append(grants, grant{p, r.contentRoots()})
		}
	}
	// Chains of attempts left half-linked are mended first, on disk too.
	for _, r := range linkAttempts(recs) {
		if err := s.d.Records.Put(state.PrefixJob, r.ID, r); err != nil {
			return fmt.Errorf("link the attempts of job %s: %w", r.root(), err)
		}
	}
	s.jobs.restore(recs)
	tellTasksNotQueued(recs, s.d.TaskNotQueued)
	if err := s.secrets.recover(); err != nil {
		return err
	}
	for _, g := range grants {
		for _, c := range g.roots {
			s.d.Access.Allow(g.to, c)
		}
	}
	return nil
}

// tellTasksNotQueued tells tell (Deps.TaskNotQueued) of each task of recs
// (this node's arrays and gangs, not its tasks' later attempts, which are
// announced each on its own) that is leased or has ended.
func tellTasksNotQueued(recs []*Record, tell func(task string, lease *wire.SignedLease, at time.Time)) {
	if tell == nil {
		return
	}
	for _, r := range recs {
		if !isTask(r.ID) || r.State == api.JobQueued {
			continue
		}
		switch {
		case !r.terminal() && r.Lease != nil:
			l := *r.Lease
			tell(r.ID, &l, r.stepAt(api.StepRent))
		case r.terminal():
			at := r.Submitted
			if n := len(r.Steps); n > 0 {
				at = r.Steps[n-1].At
			}
			tell(r.ID, nil, at)
		}
	}
}
