package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
)

// T0 is when the leases of Mixed start.
var T0 = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// Mixed is a ledger holding one lease of every kind of record, as its
// provider stores them. All leases hold 2 GPUs from T0.
type Mixed struct {
	Provider, Submitter, Submitter2 Party
	// Completed: 3 two-sided receipts, the last final, completed/job:
	// 6 GPU-minutes, owed.
	Completed Lease
	// Lost: 2 two-sided interim receipts, then the provider's one-sided
	// record of provider-lost/provider two minutes later: 8 GPU-minutes,
	// not owed, one-sided.
	Lost Lease
	// Disputed (with Submitter2): 1 interim receipt, then a dispute between
	// the provider's one-sided record of completed/job at 2 minutes (ours,
	// counted: 4 GPU-minutes, owed, one-sided) and the submitter's of
	// provider-lost/provider.
	Disputed Lease
	// Settled: 1 interim receipt, a one-sided record, then a two-sided final
	// receipt at 2 minutes that supersedes it: 4 GPU-minutes, owed.
	Settled Lease
	// Entries is how many entries Fill appended: 3+3+2+3.
	Entries int
}

// Fill appends the Mixed ledger's records to l, which must be the
// provider's (Options.Self = NewParty(tb, 1).ID, or empty).
func Fill(tb testing.TB, l *ledger.Ledger) Mixed {
	tb.Helper()
	ctx := context.Background()
	prov, sub, sub2 := NewParty(tb, 1), NewParty(tb, 2), NewParty(tb, 3)
	lease := func(id string, s Party) Lease {
		return Lease{ID: id, Job: "job-" + id, Provider: prov, Submitter: s, GPUs: 2, GPUModel: "H100", From: T0}
	}
	m := Mixed{Provider: prov, Submitter: sub, Submitter2: sub2,
		Completed: lease("completed", sub), Lost: lease("lost", sub),
		Disputed: lease("disputed", sub2), Settled: lease("settled", sub)}
	appendAll := func(rs ...ledger.Receipt) {
		for _, r := range rs {
			var err error
			if r.OneSided() {
				_, err = l.AppendOneSided(ctx, r)
			} else {
				_, err = l.Append(ctx, r)
			}
			if err != nil {
				tb.Fatalf("append %s/%d: %v", r.Lease, r.Seq, err)
			}
			m.Entries++
		}
	}
	completed := ledger.Cause{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}
	lost := ledger.Cause{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider}

	appendAll(m.Completed.Chain(tb, 3, &completed)...)

	c := m.Lost.Chain(tb, 2, nil)
	appendAll(c...)
	appendAll(m.Lost.OneSided(tb, c, 2, ledger.SignerProvider, lost))

	c = m.Disputed.Chain(tb, 1, nil)
	appendAll(c...)
	ours := m.Disputed.OneSided(tb, c, 1, ledger.SignerProvider, completed)
	theirs := m.Disputed.OneSided(tb, c, 1, ledger.SignerSubmitter, lost)
	if _, err := l.RecordDispute(ctx, m.Disputed.ID, ours, theirs); err != nil {
		tb.Fatal(err)
	}
	m.Entries++

	c = m.Settled.Chain(tb, 1, nil)
	appendAll(c...)
	appendAll(m.Settled.OneSided(tb, c, 3, ledger.SignerProvider, lost))
	appendAll(m.Settled.Chain(tb, 2, &completed)[1])
	return m
}
