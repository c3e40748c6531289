package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// recover loads this node's jobs and leases from the state store, so that
// a restart forgets nothing: submitted jobs are listed again and go on
// waiting for their provider, and leases this node provided are ended (see
// resumeAfterRestart).
func (n *Node) recover(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.state.each(prefixJob, func(b []byte) error {
		var j jobRecord
		if err := json.Unmarshal(b, &j); err != nil {
			return err
		}
		n.jobs[j.ID] = &j
		if j.Lease != nil {
			if p, err := peer.Decode(j.Lease.Terms.Provider); err == nil {
				for _, in := range j.Declaration.Data {
					if c, err := cid.Decode(in.Source); err == nil {
						n.allowLocked(p, c)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return n.state.each(prefixLease, func(b []byte) error {
		var rec leaseRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		sub, err := peer.Decode(rec.Lease.Terms.Submitter)
		if err != nil {
			return nil
		}
		for _, s := range []string{rec.Output, rec.Checkpoint} {
			if c, err := cid.Decode(s); err == nil {
				n.allowLocked(sub, c)
			}
		}
		if rec.State == leaseReleased && rec.FinalSigned {
			return nil
		}
		// The ledger is written before the record: after a crash between
		// the two, the chain goes on from what the ledger holds.
		if es, err := n.ledger.ByLease(ctx, rec.Lease.Terms.ID); err == nil && uint64(len(es)) > rec.Seq {
			last := es[len(es)-1].Receipt
			rec.Seq, rec.Prev, rec.FinalSigned = uint64(len(es)), last.Digest(), last.Final
			rec.LastAlive = latest(rec.LastAlive, last.HeldUntil)
			if rec.FinalSigned && rec.State == leaseReleased {
				return nil
			}
		}
		al := &activeLease{rec: &rec}
		n.leases[rec.Lease.Terms.ID] = al
		if rec.State != leaseReleased {
			for _, g := range rec.Lease.Terms.GPUs {
				n.held[g] = rec.Lease.Terms.ID
			}
		}
		return nil
	})
}

// resumeAfterRestart settles the leases a previous run of this node left
// open. A provider that restarts mid-run does not re-adopt the container: it
// cannot tell what the job did while nobody watched, so it kills it, ends
// the lease as provider-lost (the provider's fault) and frees the GPUs. The
// submitter keeps the last checkpoint it pulled and can resume from it.
func (n *Node) resumeAfterRestart(ctx context.Context) {
	n.mu.Lock()
	var open []*activeLease
	for _, al := range n.leases {
		open = append(open, al)
	}
	n.mu.Unlock()
	if n.runner != nil {
		// No container of ours outlives a restart.
		if err := n.runner.Sweep(ctx, func(string) bool { return false }); err != nil {
			n.log.Warn("sweep leftover containers", "err", err)
		}
	}
	for _, al := range open {
		al.mu.Lock()
		rec := al.rec
		id := rec.Lease.Terms.ID
		released := rec.State == leaseReleased
		if !released && rec.Outcome == "" {
			rec.Outcome, rec.Attribution, rec.Reason = ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider restarted"
		}
		al.mu.Unlock()
		sub, err := peer.Decode(rec.Lease.Terms.Submitter)
		if err != nil {
			continue
		}
		if info, ok := addrInfo(sub, rec.SubmitterAddrs); ok {
			n.host.Peerstore().AddAddrs(sub, info.Addrs, peerAddrTTL)
		}
		n.log.Info("settling a lease left open by a restart", "lease", id)
		if released {
			// Only the output hand-over or the final receipt is missing.
			n.mu.Lock()
			delete(n.leases, id)
			n.mu.Unlock()
		} else {
			// The meter stops at the last moment the lease was seen held,
			// not at this restart: the downtime is not the submitter's.
			al.mu.Lock()
			end := latest(rec.LastAlive, rec.Start, rec.RunStart, rec.OutputStart)
			al.mu.Unlock()
			n.release(al, end)
			if n.runner != nil {
				_ = n.runner.Cleanup(ctx, id, filepath.Join(n.leaseDir(id), "run"))
			}
			_ = os.RemoveAll(n.leaseDir(id))
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.settle(ctx, al, sub)
		}()
	}
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
