package ledgertest

import (
	"context"
	"fmt"
	"slices"

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
