package submitter

import (
	"context"
	"fmt"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Withdraw withdraws one of this node's jobs: a queued job ends at once
// with nothing owed; a leased one is stopped by its provider and released
// with outcome withdrawn.
func (s *Submitter) Withdraw(ctx context.Context, id string) (api.Job, error) {
	j := s.jobs.get(id)
	if j == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	// A job is withdrawn as its last attempt; an attempt named by its own
	// ID is that one.
	return s.handleOf(j).withdraw(ctx)
}

// withdraw withdraws the job (Withdraw): its record first, then the
// announcement, when announce is set, and, for a leased job, the word to
// its provider.
func (j *jobTracker) withdraw(ctx context.Context, announce bool) (api.Job, error) {
	id := j.id
	var provider peer.ID
	var lease string
	var badProvider error
	var out api.Job
	announced := true
	err := j.update(func(r *Record) error {
		if r.terminal() {
			return conflict(fmt.Errorf("job %s is already %s", id, r.State))
		}
		announced = !r.placeholder()
		if r.State == api.JobQueued {
			r.State = api.JobWithdrawn
			r.setEnding(ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter})
			r.Wait = ""
		} else {
			r.Withdrawn = true
			lease = r.Lease.Terms.ID
			// Checked when the lease was accepted (HandleProposal); one
			// that does not decode now was damaged on disk since.
			provider, badProvider = peer.Decode(r.Lease.Terms.Provider)
		}
		out = r.API()
		return nil
	})
	if err != nil && out.ID == "" {
		return api.Job{}, err
	}
	if err != nil {
		// Withdrawn in memory; the withdrawal goes out all the same, and a
		// restart would find the job as it was before.
		j.log.Warn("withdrawal not persisted", "job", id, "err", err)
	}
	if badProvider != nil {
		// The provider still hears of it from the announcement below.
		j.log.Error("withdrawal: the lease names a bad provider, not told directly", "job", id, "lease", lease, "err", badProvider)
	}
	if !announced && provider == "" {
		return out, nil // held for its upstreams: the network never heard of it
	}
	if announce {
		if err := j.publishJob(ctx, marketOf(j), wire.KindWithdrawal, wire.WithdrawalBody{Job: id}); err != nil {
			j.log.Warn("announce withdrawal", "job", id, "err", err)
		}
	}
	if provider != "" {
		if err := j.d.Calls.Call(ctx, provider, wire.ProtoWithdraw, wire.WithdrawRequest{Lease: lease, Job: id}, nil); err != nil {
			j.log.Warn("tell provider of withdrawal", "job", id, "err", err)
		}
	}
	return out, nil
}
