package ledgertest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
)

// roleLedger is what the roles consume of ledger.Ledger (node/provider's
// and node/submitter's Ledger together).
type roleLedger interface {
	Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
	AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
	RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error)
	Lease(ctx context.Context, lease string) (ledger.LeaseRecord, error)
	ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
}

var (
	_ roleLedger = (*ledger.Ledger)(nil)
	_ roleLedger = (*ledgertest.Memory)(nil)
)

func openLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), t.TempDir(), ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// store appends e to l through the method its kind goes by.
func store(ctx context.Context, l roleLedger, e ledger.Entry) (ledger.Entry, error) {
	switch {
	case e.Dispute != nil:
		return l.RecordDispute(ctx, e.Dispute.Lease, e.Dispute.Ours, e.Dispute.Theirs)
	case e.Receipt.OneSided():
		return l.AppendOneSided(ctx, e.Receipt)
	}
	return l.Append(ctx, e.Receipt)
}

// describe is what a role can learn of a lease from l.
func describe(t *testing.T, l roleLedger, lease string) string {
	t.Helper()
	ctx := context.Background()
	lr, err := l.Lease(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	es, err := l.ByLease(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(es []ledger.Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%d/%t/%t", e.Receipt.Seq, e.Receipt.Final, e.Superseded))
		}
		return out
	}
	var superseded []bool
	for _, e := range slices.Concat(lr.OneSided, lr.Disputes) {
		superseded = append(superseded, e.Superseded)
	}
	counted := "none"
	if c := lr.Counted(); c != nil {
		counted = fmt.Sprintf("seq %d held %s", c.Seq, c.Held())
	}
	return fmt.Sprintf("%s: byLease %v receipts %v one-sided %d disputes %d superseded %v counted %s",
		lr.State, seqs(es), seqs(lr.Receipts), len(lr.OneSided), len(lr.Disputes), superseded, counted)
}

// Memory files every kind of record as the real ledger does: the Mixed
// ledger's entries, stored in both, read back the same.
func TestMemoryFilesRecordsAsTheLedgerDoes(t *testing.T) {
	ctx := context.Background()
	led := openLedger(t)
	m := ledgertest.Fill(t, led)
	all, err := led.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mem ledgertest.Memory
	for _, e := range all {
		got, err := store(ctx, &mem, e)
		if err != nil {
			t.Fatalf("entry %d: %v", e.Index, err)
		}
		if got.Index != e.Index {
			t.Fatalf("entry %d stored as %d", e.Index, got.Index)
		}
	}
	if n := len(mem.Entries()); n != m.Entries {
		t.Fatalf("%d entries, want %d", n, m.Entries)
	}
	for _, l := range []ledgertest.Lease{m.Completed, m.Lost, m.Disputed, m.Settled, {ID: "never"}} {
		if got, want := describe(t, &mem, l.ID), describe(t, led, l.ID); got != want {
			t.Errorf("lease %s:\n memory %s\n ledger %s", l.ID, got, want)
		}
	}
	// Storing an entry again returns the first one, in both.
	for _, e := range all {
		for name, l := range map[string]roleLedger{"memory": &mem, "ledger": led} {
			got, err := store(ctx, l, e)
			if err != nil || got.Index != e.Index {
				t.Errorf("%s: entry %d stored again: index %d, %v", name, e.Index, got.Index, err)
			}
		}
	}
}

// Memory refuses what the real ledger refuses between records.
func TestMemoryRefusesAsTheLedgerDoes(t *testing.T) {
	ctx := context.Background()
	prov, sub := ledgertest.NewParty(t, 1), ledgertest.NewParty(t, 2)
	lease := ledgertest.Lease{ID: "l", Job: "j", Provider: prov, Submitter: sub, GPUs: 1, From: ledgertest.T0}
	completed := ledger.Cause{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}
	interim := lease.Chain(t, 2, nil)
	final := lease.Chain(t, 3, &completed)
	other := lease
	other.GPUModel = "H200" // signs different bytes at every seq
	cases := []struct {
		name   string
		before []ledger.Receipt
		try    func(l roleLedger) error
		want   error
	}{
		{"a one-sided record through Append", nil, func(l roleLedger) error {
			_, err := l.Append(ctx, lease.OneSided(t, interim, 1, ledger.SignerProvider, completed))
			return err
		}, ledger.ErrInvalidReceipt},
		{"a two-sided receipt through AppendOneSided", nil, func(l roleLedger) error {
			_, err := l.AppendOneSided(ctx, interim[0])
			return err
		}, ledger.ErrInvalidReceipt},
		{"another receipt at a stored seq", interim, func(l roleLedger) error {
			_, err := l.Append(ctx, other.Chain(t, 2, nil)[1])
			return err
		}, ledger.ErrConflict},
		{"a receipt after the final", final, func(l roleLedger) error {
			_, err := l.Append(ctx, lease.Chain(t, 4, nil)[3])
			return err
		}, ledger.ErrConflict},
		{"a one-sided record of a settled lease", final, func(l roleLedger) error {
			_, err := l.AppendOneSided(ctx, lease.OneSided(t, final, 1, ledger.SignerProvider, completed))
			return err
		}, ledger.ErrConflict},
		{"a dispute of a settled lease", final, func(l roleLedger) error {
			ours := lease.OneSided(t, final, 1, ledger.SignerProvider, completed)
			theirs := lease.OneSided(t, final, 2, ledger.SignerSubmitter, completed)
			_, err := l.RecordDispute(ctx, lease.ID, ours, theirs)
			return err
		}, ledger.ErrConflict},
		{"the next receipt", interim, func(l roleLedger) error {
			_, err := l.Append(ctx, lease.Chain(t, 3, nil)[2])
			return err
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for name, l := range map[string]roleLedger{"memory": &ledgertest.Memory{}, "ledger": openLedger(t)} {
				for _, r := range c.before {
					if _, err := l.Append(ctx, r); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				if err := c.try(l); !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", name, err, c.want)
				}
			}
		})
	}
}

// What Memory hands out is a copy, and concurrent use keeps every receipt
// (run with -race).
func TestMemoryConcurrentUse(t *testing.T) {
	ctx := context.Background()
	prov, sub := ledgertest.NewParty(t, 1), ledgertest.NewParty(t, 2)
	var mem ledgertest.Memory
	var wg sync.WaitGroup
	for i := range 8 {
		lease := ledgertest.Lease{ID: fmt.Sprint("l", i), Job: "j", Provider: prov, Submitter: sub, GPUs: 1, From: ledgertest.T0}
		chain := lease.Chain(t, 5, nil)
		wg.Go(func() {
			for _, r := range chain {
				if _, err := mem.Append(ctx, r); err != nil {
					t.Error(err)
				}
				es, err := mem.ByLease(ctx, lease.ID)
				if err != nil {
					t.Error(err)
					return
				}
				es[0].Receipt.ProviderSig[0] ^= 0xff // a copy: the stored one stays whole
			}
		})
	}
	wg.Wait()
	es := mem.Entries()
	if len(es) != 40 {
		t.Fatalf("%d entries, want 40", len(es))
	}
	for i, e := range es {
		if e.Index != uint64(i+1) {
			t.Fatalf("entry %d has index %d", i+1, e.Index)
		}
		if err := e.Receipt.Verify(); err != nil {
			t.Fatalf("entry %d: %v", e.Index, err)
		}
	}
}
