package ledgertest

import (
	"time"

	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/e31network/e31/ledger"
)

// Memory is a ledger kept in memory, for tests of the roles (node/provider,
// node/submitter) that store receipts through one and read them back. It
// files what it is given as ledger.Ledger does: entries numbered from 1 in
// the order stored, two-sided receipts by lease and seq, one-sided records
// and disputes beside them. It refuses what the real ledger refuses between
// records: a receipt through the wrong method (ledger.ErrInvalidReceipt), a
// different receipt for a (lease, seq) already stored, a receipt after a
// lease's final one or a second final, and a one-sided record or dispute
// for a lease a two-sided final receipt settled (ledger.ErrConflict).
// Storing the same receipt, record or dispute again returns its first
// entry. It checks no signature and no Prev link and hashes no chain
// (Entry.Prev and Hash stay empty), so tests may hand it receipts made by
// hand.
//
// The zero value is empty and ready to use; it is safe for concurrent use.
// What it returns is a copy: neither the caller nor the Memory can change
// the other's receipts.
type Memory struct {
	mu      sync.Mutex
	entries []ledger.Entry // guarded by mu: entry Index i+1 at i
	// leases are the terms kept for each lease (KeepLease), guarded by mu.
	leases map[string]ledger.LeaseTerms
	// verdicts are those kept (KeepVerdict), guarded by mu.
	verdicts []ledger.Verdict
}

// KeepLease keeps a lease's terms, as ledger.Ledger does, without
// checking its signatures; Append then refuses the lease's receipts
// that its terms do not allow (ledger.CheckHeld).
func (m *Memory) KeepLease(ctx context.Context, ev ledger.LeaseEvidence) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := ev.Parse()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases == nil {
		m.leases = map[string]ledger.LeaseTerms{}
	}
	if old, ok := m.leases[t.ID]; ok && old != t {
		return fmt.Errorf("keep lease %s: %w: other terms are kept under its ID", t.ID, ledger.ErrConflict)
	}
	m.leases[t.ID] = t
	return nil
}

// KeptLease returns the terms kept for a lease.
func (m *Memory) KeptLease(lease string) (ledger.LeaseTerms, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.leases[lease]
	return t, ok
}

// Append stores a receipt both parties signed.
func (m *Memory) Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error) {
	what := fmt.Sprintf("append lease %s seq %d", r.Lease, r.Seq)
	if err := ctx.Err(); err != nil {
		return ledger.Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	if r.OneSided() {
		return ledger.Entry{}, fmt.Errorf("%s: %w: a one-sided record goes through AppendOneSided", what, ledger.ErrInvalidReceipt)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.leases[r.Lease]; ok {
		if err := ledger.CheckHeld(&r, t); err != nil {
			return ledger.Entry{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	stored := m.twoSided(r.Lease)
	for _, e := range stored {
		if e.Receipt.Seq == r.Seq && same(&e.Receipt, &r) {
			return e, nil
		}
	}
	for _, e := range stored {
		s := &e.Receipt
		switch {
		case s.Seq == r.Seq:
			return ledger.Entry{}, fmt.Errorf("%s: %w: another receipt has this seq", what, ledger.ErrConflict)
		case s.Final:
			return ledger.Entry{}, fmt.Errorf("%s: %w: the lease's final receipt is seq %d", what, ledger.ErrConflict, s.Seq)
		case r.Final && s.Seq > r.Seq:
			return ledger.Entry{}, fmt.Errorf("%s: %w: final before stored seq %d", what, ledger.ErrConflict, s.Seq)
		}
	}
	return m.add(ledger.Entry{Receipt: copyReceipt(r)}), nil
}

// AppendOneSided stores a one-sided final record.
func (m *Memory) AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error) {
	what := fmt.Sprintf("append one-sided record of lease %s", r.Lease)
	if err := ctx.Err(); err != nil {
		return ledger.Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	if !r.OneSided() {
		return ledger.Entry{}, fmt.Errorf("%s: %w: no signer named", what, ledger.ErrInvalidReceipt)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.Dispute == nil && e.Receipt.OneSided() && same(&e.Receipt, &r) {
			return copyEntry(e), nil
		}
	}
	if m.settled(r.Lease) {
		return ledger.Entry{}, fmt.Errorf("%s: %w: settled by a two-sided final receipt", what, ledger.ErrConflict)
	}
	return m.add(ledger.Entry{Receipt: copyReceipt(r)}), nil
}

// RecordDispute stores that the parties of a lease hold different versions
// of its end: ours, this node's, and theirs.
func (m *Memory) RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error) {
	what := fmt.Sprintf("record dispute of lease %s", lease)
	if err := ctx.Err(); err != nil {
		return ledger.Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if d := e.Dispute; d != nil && d.Lease == lease && same(&d.Ours, &ours) && same(&d.Theirs, &theirs) {
			return copyEntry(e), nil
		}
	}
	if m.settled(lease) {
		return ledger.Entry{}, fmt.Errorf("%s: %w: settled by a two-sided final receipt", what, ledger.ErrConflict)
	}
	d := &ledger.Dispute{Lease: lease, Ours: copyReceipt(ours), Theirs: copyReceipt(theirs)}
	return m.add(ledger.Entry{Dispute: d}), nil
}

// ByLease returns a lease's receipts signed by both parties, in seq order.
func (m *Memory) ByLease(ctx context.Context, lease string) ([]ledger.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("receipts of lease %s: %w", lease, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.twoSided(lease), nil
}

// Lease returns everything stored on a lease and how it stands.
func (m *Memory) Lease(ctx context.Context, lease string) (ledger.LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return ledger.LeaseRecord{}, fmt.Errorf("lease %s: %w", lease, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lr := ledger.LeaseRecord{Lease: lease, Receipts: m.twoSided(lease)}
	for _, e := range m.entries {
		switch {
		case e.Dispute != nil && e.Dispute.Lease == lease:
			lr.Disputes = append(lr.Disputes, copyEntry(e))
		case e.Dispute == nil && e.Receipt.OneSided() && e.Receipt.Lease == lease:
			lr.OneSided = append(lr.OneSided, copyEntry(e))
		}
	}
	final := len(lr.Receipts) > 0 && lr.Receipts[len(lr.Receipts)-1].Receipt.Final
	switch {
	case final:
		lr.State = ledger.SettlementTwoSided
	case len(lr.Disputes) > 0:
		lr.State = ledger.SettlementDisputed
	case len(lr.OneSided) > 0:
		lr.State = ledger.SettlementOneSided
	case len(lr.Receipts) > 0:
		lr.State = ledger.SettlementOpen
	default:
		lr.State = ledger.SettlementNone
	}
	for _, es := range [][]ledger.Entry{lr.OneSided, lr.Disputes} {
		for i := range es {
			es[i].Superseded = final
		}
	}
	return lr, nil
}

// Entries returns every entry stored, in the order stored.
func (m *Memory) Entries() []ledger.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ledger.Entry, len(m.entries))
	for i, e := range m.entries {
		out[i] = copyEntry(e)
	}
	return out
}

// OneSided returns every one-sided final record stored, of any lease, in
// the order stored.
func (m *Memory) OneSided() []ledger.Receipt {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ledger.Receipt
	for _, e := range m.entries {
		if e.Dispute == nil && e.Receipt.OneSided() {
			out = append(out, copyReceipt(e.Receipt))
		}
	}
	return out
}

// add appends e as the next entry and returns a copy. m.mu must be held.
func (m *Memory) add(e ledger.Entry) ledger.Entry {
	e.Index = uint64(len(m.entries)) + 1
	m.entries = append(m.entries, e)
	return copyEntry(e)
}

// twoSided is the lease's two-sided receipts in seq order. m.mu must be
// held.
func (m *Memory) twoSided(lease string) []ledger.Entry {
	var out []ledger.Entry
	for _, e := range m.entries {
		if e.Dispute == nil && !e.Receipt.OneSided() && e.Receipt.Lease == lease {
			out = append(out, copyEntry(e))
		}
	}
	slices.SortFunc(out, func(a, b ledger.Entry) int { return cmp.Compare(a.Receipt.Seq, b.Receipt.Seq) })
	return out
}

// settled reports whether a two-sided final receipt ends the lease. m.mu
// must be held.
func (m *Memory) settled(lease string) bool {
	for _, e := range m.entries {
		if e.Dispute == nil && !e.Receipt.OneSided() && e.Receipt.Lease == lease && e.Receipt.Final {
			return true
		}
	}
	return false
}

// same reports whether a and b are one receipt: the same signed bytes and
// the same signatures.
func same(a, b *ledger.Receipt) bool {
	return a.Digest() == b.Digest() && bytes.Equal(a.ProviderSig, b.ProviderSig) && bytes.Equal(a.SubmitterSig, b.SubmitterSig)
}

// copyReceipt copies what r shares through pointers and slices.
func copyReceipt(r ledger.Receipt) ledger.Receipt {
	if r.ExitCode != nil {
		c := *r.ExitCode
		r.ExitCode = &c
	}
	r.GPUsSeen = slices.Clone(r.GPUsSeen)
	r.ProviderSig, r.SubmitterSig = slices.Clone(r.ProviderSig), slices.Clone(r.SubmitterSig)
	if ev := r.Evidence; ev != nil {
		r.Evidence = &ledger.LeaseEvidence{
			Terms:        slices.Clone(ev.Terms),
			ProviderSig:  slices.Clone(ev.ProviderSig),
			SubmitterSig: slices.Clone(ev.SubmitterSig),
		}
	}
	return r
}

func copyEntry(e ledger.Entry) ledger.Entry {
	e.Receipt = copyReceipt(e.Receipt)
	if d := e.Dispute; d != nil {
		e.Dispute = &ledger.Dispute{Lease: d.Lease, Ours: copyReceipt(d.Ours), Theirs: copyReceipt(d.Theirs)}
	}
	return e
}

// HeldByJobs sums the held time of the jobs' leases as ledger.Ledger
// does, each lease by the record LeaseRecord.Counted names, billed by
// Policy.Bill, the losers of the verdicts kept not owed.
func (m *Memory) HeldByJobs(ctx context.Context, policy ledger.Policy, jobs ...string) (ledger.JobHeld, error) {
	var leases []string
	m.mu.Lock()
	for _, e := range m.entries {
		r := e.Receipt
		if e.Dispute != nil {
			r = e.Dispute.Ours
		}
		if slices.Contains(jobs, r.Job) && !slices.Contains(leases, r.Lease) {
			leases = append(leases, r.Lease)
		}
	}
	policy = policy.WithLost(m.verdicts)
	m.mu.Unlock()
	var out ledger.JobHeld
	for _, name := range leases {
		lr, err := m.Lease(ctx, name)
		if err != nil {
			return ledger.JobHeld{}, err
		}
		r := lr.Counted()
		if r == nil {
			continue
		}
		out.Add(policy.Bill(r, time.Time{}), lr.State == ledger.SettlementOneSided || lr.State == ledger.SettlementDisputed)
		if !slices.Contains(out.Providers, r.Provider) {
			out.Providers = append(out.Providers, r.Provider)
		}
	}
	return out, nil
}
