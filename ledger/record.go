package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ProviderRecord is what this node's own ledger says of one provider:
// local knowledge, built from receipts both parties signed and the
// verdicts this node keeps. It guides this node's choices and its user's,
// never the deterministic Match, which every node must compute alike.
type ProviderRecord struct {
	Provider peer.ID `json:"provider"`
	// Leases counts the provider's leases with a receipt both parties
	// signed; Completed those whose final receipt says completed.
	Leases    int `json:"leases"`
	Completed int `json:"completed"`
	// ProviderCaused counts the final receipts that hold the provider
	// responsible for how its lease ended.
	ProviderCaused int `json:"provider_caused"`
	// Disputes counts the leases whose end the two parties disputed.
	Disputes int `json:"disputes"`
	// VerificationWins and VerificationLosses count the provider's
	// replicas that a verdict with a winner found with the majority, or
	// against it.
	VerificationWins   int `json:"verification_wins"`
	VerificationLosses int `json:"verification_losses"`
	// GPUProbeFailures counts the leases that ended failed because the
	// provider's GPUs failed the probe at lease start.
	GPUProbeFailures int `json:"gpu_probe_failures"`
	// MedianFirstReceipt is the median time from a lease's start (its
	// proposal, by the terms both signed, else its first receipt's held
	// time) to the end of the time its first receipt covers; zero where
	// no lease has a first receipt here.
	MedianFirstReceipt time.Duration `json:"median_first_receipt"`
}

// Bad counts the endings and verifications that went against the
// provider.
func (r ProviderRecord) Bad() int { return r.ProviderCaused + r.VerificationLosses }

// Score is the record in a few characters: "12 ok/1 bad" (completed
// leases, and endings the provider caused or verifications it lost), or
// "new" for a provider with neither.
func (r ProviderRecord) Score() string {
	if r.Completed == 0 && r.Bad() == 0 {
		return "new"
	}
	return fmt.Sprintf("%d ok/%d bad", r.Completed, r.Bad())
}

// gpuProbeFailed reports whether a final receipt's reason says the GPUs
// failed the probe at lease start.
func gpuProbeFailed(reason string) bool { return strings.HasPrefix(reason, "gpu probe failed") }

// ProviderRecords builds the record of every provider this node's ledger
// names in a receipt both parties signed or in a verdict it keeps.
func (l *Ledger) ProviderRecords(ctx context.Context) (map[peer.ID]ProviderRecord, error) {
	es, err := l.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("provider records: %w", err)
	}
	vs, err := l.Verdicts(ctx)
	if err != nil {
		return nil, fmt.Errorf("provider records: %w", err)
	}
	starts, err := l.proposedAt(ctx, settledLeases(es))
	if err != nil {
		return nil, fmt.Errorf("provider records: %w", err)
	}
	return ProviderRecordsOf(es, vs, starts), nil
}

// ProviderRecordsOf builds each provider's record from entries and
// verdicts, the time to a lease's first receipt counted from when it was
// proposed where starts says (by lease ID), else from its first held time.
func ProviderRecordsOf(es []Entry, vs []Verdict, starts map[string]time.Time) map[peer.ID]ProviderRecord {
	out := map[peer.ID]ProviderRecord{}
	firsts := map[peer.ID][]time.Duration{}
	for _, lr := range settledLeases(es) {
		if len(lr.Receipts) == 0 {
			continue
		}
		first := &lr.Receipts[0].Receipt
		rec := out[first.Provider]
		rec.Provider = first.Provider
		rec.Leases++
		if len(lr.Disputes) > 0 {
			rec.Disputes++
		}
		if first.Seq == 0 {
			start, ok := starts[lr.Lease]
			if !ok {
				start = msTime(first.HeldFrom)
			}
			if d := msTime(first.HeldUntil).Sub(start); d >= 0 {
				firsts[first.Provider] = append(firsts[first.Provider], d)
			}
		}
		if last := &lr.Receipts[len(lr.Receipts)-1].Receipt; last.Final {
			countEnding(&rec, last)
		}
		out[first.Provider] = rec
	}
	for i := range vs {
		v := &vs[i]
		if v.Winner == "" {
			continue
		}
		for _, r := range v.Replicas {
			rec := out[r.Provider]
			rec.Provider = r.Provider
			if r.Compared == v.Winner {
				rec.VerificationWins++
			} else {
				rec.VerificationLosses++
			}
			out[r.Provider] = rec
		}
	}
	for p, ds := range firsts {
		rec := out[p]
		rec.MedianFirstReceipt = median(ds)
		out[p] = rec
	}
	return out
}

// proposedAt reads, in one transaction, when each lease with a
// two-sided receipt was proposed, by the terms kept for it; a lease
// without kept terms is left out.
func (l *Ledger) proposedAt(ctx context.Context, leases []*LeaseRecord) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := l.view(ctx, func(txn *badger.Txn) error {
		for _, lr := range leases {
			if len(lr.Receipts) == 0 {
				continue
			}
			ev, ok, err := keptLease(txn, lr.Lease)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if t, err := ev.Parse(); err == nil && !t.Proposed.IsZero() {
				out[lr.Lease] = t.Proposed
			}
		}
		return nil
	})
	return out, err
}

// countEnding counts a two-sided final receipt in the record.
func countEnding(rec *ProviderRecord, r *Receipt) {
	if r.Outcome == OutcomeCompleted {
		rec.Completed++
	}
	if r.Attribution == AttributionProvider {
		rec.ProviderCaused++
	}
	if r.Outcome == OutcomeFailed && gpuProbeFailed(r.Reason) {
		rec.GPUProbeFailures++
	}
}

// median is the middle of ds (the mean of the two middle ones for an
// even count); zero for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
