package submitter

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// claims refuses a proposal for the queued job j that the checks of
// results rule out, with why the provider is to be avoided for it: a
// provider this node distrusts (distrust.go), the provider of another run
// of the same check while the check is open, or, for a job that asks for
// a record (verify.min_record), one this node's ledger has seen complete
// fewer leases.
func (v *verifier) claims(ctx context.Context, j *jobTracker, provider string, now time.Time) (avoid string, err error) {
	if d, ok := v.distrust.of(provider, now); ok {
		return "it lost a check of results", p2p.Refuse(wire.CodeDistrusted,
			fmt.Errorf("declined: provider %s lost a check of results (job %s) and is distrusted until %s", provider, d.Job, d.Until.UTC().Format(time.RFC3339)))
	}
	first := firstOf(v.k, j)
	if first == nil {
		return "", nil
	}
	head := first.snapshot()
	if head.ReplicaOf != "" {
		if t := v.k.jobs.get(head.ReplicaOf); t != nil {
			head = t.snapshot()
		}
	}
	if len(head.Replicas) > 0 && head.Verdict == nil && head.RerunFor == "" {
		// Only while the check is open: a task run again once its
		// provider was caught may go to any provider but that one.
		runs, _ := v.runs(head)
		for _, r := range runs {
			if r.t.id == first.id {
				continue
			}
			for _, a := range v.k.attempts(r.t) {
				rec := a.snapshot()
				other := rec.provider()
				if other == provider {
					return "it runs another replica of the job", p2p.Refuse(wire.CodeOtherReplica,
						fmt.Errorf("declined: provider %s runs another replica of job %s", provider, head.ID))
				}
				if other != "" && sameBlock(v.addrsOf(provider), v.addrsOf(other)) {
					return "it shares an address block with the provider of another replica", p2p.Refuse(wire.CodeOtherReplica,
						fmt.Errorf("declined: provider %s shares a public address block with %s, which runs another replica of job %s", provider, other, head.ID))
				}
			}
		}
	}
	if vf := verifyOf(v.k, head); vf != nil && vf.MinRecord > 0 {
		if n := v.completed(ctx, provider); n < vf.MinRecord {
			return "too short a record", p2p.Refuse(wire.CodeNoRecord,
				fmt.Errorf("declined: job %s asks for providers that completed %d leases for this node; provider %s completed %d", head.ID, vf.MinRecord, provider, n))
		}
	}
	return "", nil
}

// firstOf is the tracker of the first attempt of the job j is an attempt
// of; nil when it is not in the registry.
func firstOf(k *kit, j *jobTracker) *jobTracker {
	var root string
	j.view(func(r *Record) { root = r.root() })
	if root == j.id {
		return j
	}
	return k.jobs.get(root)
}

// completed is how many leases provider completed for this node, as its
// own ledger's two-sided receipts say.
func (v *verifier) completed(ctx context.Context, provider string) int {
	p, err := peer.Decode(provider)
	if err != nil {
		return 0
	}
	now := time.Now()
	v.mu.Lock()
	recs, fresh := v.records, now.Sub(v.recordsAt) < recordsFor
	v.mu.Unlock()
	if !fresh {
		if recs, err = v.k.d.Ledger.ProviderRecords(ctx); err != nil {
			v.k.log.Warn("read providers' records", "err", err)
			return 0
		}
		v.mu.Lock()
		v.records, v.recordsAt = recs, now
		v.mu.Unlock()
	}
	return recs[p].Completed
}

// recordsFor is how long the providers' records read from the ledger
// answer proposals before it is read again: each read goes over the whole
// ledger, and a lease completes in minutes, not seconds.
const recordsFor = 10 * time.Second

// addrsOf are the addresses a provider's offer in this node's view lists.
func (v *verifier) addrsOf(provider string) []string {
	e, ok := v.k.d.Offers.Get(provider)
	if !ok {
		return nil
	}
	return e.Addrs
}
