package submitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// propose answers a lease proposal for the job that the Submitter checked
// as a message (HandleProposal): the job accepts it if it is still queued,
// does not avoid the provider and the terms match its declaration. The
// acceptance is on disk before the countersignature is returned.
func (j *jobTracker) propose(from peer.ID, sl wire.SignedLease) (any, error) {
	t := sl.Terms
	(failureWatch{j}).noteProposal(from)
	// Read before the lease is accepted: a lease whose run would miss them
	// is not countersigned.
	secrets, err := j.leaseSecrets()
	if err != nil {
		return nil, err
	}
	// Decided one task of a capped array at a time (array_parallel.go).
	done, err := j.parallel.admit(j.parallelOf(t.Job))
	if err != nil {
		return nil, err
	}
	defer done()
	if err := sl.Countersign(j.d.Key); err != nil {
		return nil, err
	}
	var inputs []cid.Cid
	err = j.apply(func(cur *jobTracker) error {
		r := cur.rec
		if r.isArray() {
			return p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: %s is an array; its tasks are leased", t.Job))
		}
		if r.State != api.JobQueued {
			return p2p.Refuse(wire.CodeNotQueued, fmt.Errorf("declined: job %s is %s", t.Job, r.State))
		}
		if r.MovedTo != nil {
			return p2p.Refuse(wire.CodeNotQueued, fmt.Errorf("declined: job %s is moving to market %s", t.Job, r.MovedTo))
		}
		if slices.Contains(r.Avoid, t.Provider) {
			// A view that has not caught up with the avoid list yet.
			return p2p.Refuse(wire.CodeDeclined, fmt.Errorf("declined: provider %s failed job %s before", t.Provider, t.Job))
		}
		req := r.Declaration.Request
		if len(t.GPUs) != req.GPUs || t.Limit != req.Limit || t.CPUs != req.CPUs || t.MemoryBytes != uint64(req.Memory) {
			return p2p.Refuse(wire.CodeDeclined, errors.New("declined: terms do not match the declaration"))
		}
		now := time.Now()
		r.State = api.JobRenting
		r.Lease, r.Confirmed = &sl, false
		r.Wait = ""
		r.step(api.StepRent, now)
		cur.lastContact = now
		inputs = r.contentRoots()
		return nil
	})
	if err == nil {
		// The terms both signed go beside the ledger's chain before the
		// countersignature leaves: every receipt of the lease is then
		// checked against them as it is stored (ledger.KeepLease).
		if kerr := j.d.Ledger.KeepLease(context.Background(), sl.Evidence()); kerr != nil {
			err = fmt.Errorf("keep the lease's terms: %w", kerr)
		}
	}
	if err != nil {
		if p2p.RefusalCode(err) != "" {
			return nil, err
		}
		// Not on disk: the countersignature must not leave. The job goes
		// back to the queue in memory too.
		j.change(func(r *Record) error {
			if r.Lease != nil && r.Lease.Terms.ID == t.ID {
				r.State, r.Lease = api.JobQueued, nil
				r.Steps = slices.DeleteFunc(r.Steps, func(st api.Step) bool { return st.Step != api.StepSubmit })
			}
			return nil
		})
		return nil, fmt.Errorf("accept proposal: %w", err)
	}
	for _, c := range inputs {
		j.d.Access.Allow(from, c)
	}
	if isTask(t.Job) {
		j.batch.lease(j.keyOf(marketOf(j)), sl)
	}
	j.log.Info("lease accepted", "job", t.Job, "lease", t.ID, "provider", from)
	// The secrets' values go with the countersignature, to the provider
	// that proposed: HandleProposal checked that it is the one the terms
	// name, and that this node's Match chose it.
	return wire.ProposeReply{SubmitterSig: sl.SubmitterSig, Secrets: secrets}, nil
}
