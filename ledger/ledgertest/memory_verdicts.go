package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/e31network/e31/ledger"
)

// KeepVerdict verifies a verdict and keeps it, as ledger.Ledger does;
// keeping the same verdict again is harmless.
func (m *Memory) KeepVerdict(ctx context.Context, v ledger.Verdict) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := v.Verify(); err != nil {
		return fmt.Errorf("keep verdict: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, old := range m.verdicts {
		if slices.Equal(old.SigningBytes(), v.SigningBytes()) {
			return nil
		}
	}
	v.Replicas = slices.Clone(v.Replicas)
	v.Sig = slices.Clone(v.Sig)
	m.verdicts = append(m.verdicts, v)
	return nil
}

// Verdicts returns the verdicts kept, in the order kept.
func (m *Memory) Verdicts(ctx context.Context) ([]ledger.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ledger.Verdict, len(m.verdicts))
	for i, v := range m.verdicts {
		v.Replicas = slices.Clone(v.Replicas)
		v.Sig = slices.Clone(v.Sig)
		out[i] = v
	}
	return out, nil
}

// ProviderRecords builds each provider's record from the entries and
// verdicts kept, as ledger.Ledger does, timing first receipts from the
// kept leases' proposals.
func (m *Memory) ProviderRecords(ctx context.Context) (map[peer.ID]ledger.ProviderRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vs, _ := m.Verdicts(ctx)
	es := m.Entries()
	starts := map[string]time.Time{}
	for _, e := range es {
		if e.Receipt.Lease == "" {
			continue
		}
		if t, ok := m.KeptLease(e.Receipt.Lease); ok {
			starts[e.Receipt.Lease] = t.Proposed
		}
	}
	return ledger.ProviderRecordsOf(es, vs, starts), nil
}
