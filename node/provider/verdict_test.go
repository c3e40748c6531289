package provider

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

const (
	outGood = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
	outBad  = "bafybeihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
)

// verdictCase is a provider's ledger holding the final receipt of lease
// "lease-me", leased by sub, whose output was outBad; other is a second
// submitter, honest the provider that gave outGood.
type verdictCase struct {
	me, sub, other, honest ledgertest.Party
	ledger                 *ledger.Ledger
	inbox                  *VerdictInbox
}

func newVerdictCase(t testing.TB) *verdictCase {
	t.Helper()
	c := &verdictCase{
		me: ledgertest.NewParty(t, 1), sub: ledgertest.NewParty(t, 2),
		other: ledgertest.NewParty(t, 3), honest: ledgertest.NewParty(t, 4),
	}
	l, err := ledger.Open(context.Background(), "", ledger.Options{InMemory: true, Self: c.me.ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	from := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	code := 0
	r := ledger.Receipt{
		Lease: "lease-me", Job: "job-1", Provider: c.me.ID, Submitter: c.sub.ID, GPUs: 1,
		HeldFrom: from, HeldUntil: from.Add(time.Minute), Phase: ledger.PhaseOutput, Final: true,
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, ExitCode: &code, Output: outBad,
	}
	if err := r.SignProvider(c.me.Key); err != nil {
		t.Fatal(err)
	}
	if err := r.Countersign(c.sub.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	c.ledger, c.inbox = l, NewVerdictInbox(c.me.ID, l, nil)
	return c
}

// verdict is by's signed verdict comparing lease-me (with output mine)
// and the honest provider's lease-h.
func (c *verdictCase) verdict(t testing.TB, by ledgertest.Party, lease, mine string) json.RawMessage {
	t.Helper()
	v := ledger.NewVerdict("job-1", by.ID, ledger.CompareOutput, []ledger.VerdictReplica{
		{Lease: lease, Provider: c.me.ID, Output: mine, Compared: mine},
		{Lease: "lease-h", Provider: c.honest.ID, Output: outGood, Compared: outGood},
		{Lease: "lease-h2", Provider: c.other.ID, Output: outGood, Compared: outGood},
	}, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	if err := v.Sign(by.Key); err != nil {
		t.Fatal(err)
	}
	b, err := ledger.MarshalVerdict(v)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(wire.VerdictRequest{Verdict: b})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func (c *verdictCase) kept(t *testing.T) int {
	t.Helper()
	vs, err := c.ledger.Verdicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(vs)
}

func TestVerdictInboxRefuses(t *testing.T) {
	ctx := context.Background()
	c := newVerdictCase(t)
	stranger := ledgertest.NewParty(t, 9)
	for _, tc := range []struct {
		name string
		from ledgertest.Party
		raw  json.RawMessage
		code string
	}{
		{"not json", c.sub, json.RawMessage(`{"verdict":`), wire.CodeBadVerdict},
		{"unknown field", c.sub, json.RawMessage(`{"verdict":{},"x":1}`), wire.CodeBadVerdict},
		{"sent by another", stranger, c.verdict(t, c.sub, "lease-me", outBad), wire.CodeBadVerdict},
		{"not the lease's submitter", c.other, c.verdict(t, c.other, "lease-me", outBad), wire.CodeNoReceipt},
		{"another's lease", c.sub, c.verdict(t, c.sub, "lease-unknown", outBad), wire.CodeNoReceipt},
		{"wrong output", c.sub, c.verdict(t, c.sub, "lease-me", outGood), wire.CodeWrongOutput},
	} {
		_, err := c.inbox.Handle(ctx, tc.from.ID, tc.raw)
		if got := p2p.RefusalCode(err); got != tc.code {
			t.Errorf("%s: refusal %q (%v), want %q", tc.name, got, err, tc.code)
		}
	}
	// A verdict naming none of this provider's leases.
	v := ledger.NewVerdict("job-1", c.sub.ID, ledger.CompareOutput, []ledger.VerdictReplica{
		{Lease: "lease-h", Provider: c.honest.ID, Output: outGood, Compared: outGood},
		{Lease: "lease-h2", Provider: c.other.ID, Output: outGood, Compared: outGood},
	}, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	if err := v.Sign(c.sub.Key); err != nil {
		t.Fatal(err)
	}
	b, _ := ledger.MarshalVerdict(v)
	raw, _ := json.Marshal(wire.VerdictRequest{Verdict: b})
	if _, err := c.inbox.Handle(ctx, c.sub.ID, raw); p2p.RefusalCode(err) != wire.CodeNoReceipt {
		t.Errorf("verdict on others' leases: %v, want %q", err, wire.CodeNoReceipt)
	}
	if n := c.kept(t); n != 0 {
		t.Fatalf("%d verdicts kept after refusals, want 0", n)
	}
}

func TestVerdictInboxKeepsGood(t *testing.T) {
	ctx := context.Background()
	c := newVerdictCase(t)
	raw := c.verdict(t, c.sub, "lease-me", outBad)
	for range 2 {
		if _, err := c.inbox.Handle(ctx, c.sub.ID, raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.kept(t); n != 1 {
		t.Fatalf("%d verdicts kept, want 1", n)
	}
	// The lost lease is no longer owed in the provider's own figures.
	u, err := c.ledger.Usage(ctx, ledger.UsageFilter{}, ledger.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if u.Total.OwedGPUHours != 0 || u.Total.LostGPUHours <= 0 {
		t.Errorf("usage after the verdict: %+v, want nothing owed and the lease lost", u.Total)
	}
}

// A lease a kept verdict names a loser is billed not owed in the
// provider's own history of its leases (e31 leases), as in e31 usage.
func TestLeaseHistoryLostVerification(t *testing.T) {
	ctx := context.Background()
	c := newVerdictCase(t)
	q := &LeaseQuery{self: c.me.ID, ledger: c.ledger, policy: ledger.DefaultPolicy()}
	owed := func() float64 {
		t.Helper()
		h, err := q.History(ctx, api.LeasesQuery{})
		if err != nil || len(h) != 1 {
			t.Fatalf("history: %+v, %v; want lease-me", h, err)
		}
		return h[0].Billed.OwedGPUHours
	}
	if owed() <= 0 {
		t.Fatal("a completed lease is not owed before any verdict")
	}
	if _, err := c.inbox.Handle(ctx, c.sub.ID, c.verdict(t, c.sub, "lease-me", outBad)); err != nil {
		t.Fatal(err)
	}
	if got := owed(); got != 0 {
		t.Errorf("owed %v GPU-h after the verdict, want 0", got)
	}
}

// FuzzVerdictInbox feeds the verdict handler whatever a peer might send:
// it never panics, and keeps only a verdict that verifies and names the
// provider's lease with the output its receipt names.
func FuzzVerdictInbox(f *testing.F) {
	c := newVerdictCase(f)
	f.Add([]byte(c.verdict(f, c.sub, "lease-me", outBad)))
	f.Add([]byte(c.verdict(f, c.sub, "lease-me", outGood)))
	f.Add([]byte(c.verdict(f, c.other, "lease-me", outBad)))
	f.Add([]byte(`{"verdict":{}}`))
	f.Add([]byte(`{"verdict":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := c.inbox.Handle(context.Background(), c.sub.ID, raw)
		if err != nil {
			return
		}
		var req wire.VerdictRequest
		if jerr := json.Unmarshal(raw, &req); jerr != nil {
			t.Fatalf("kept a verdict from a request that does not decode: %v", jerr)
		}
		v, verr := ledger.UnmarshalVerdict(req.Verdict)
		if verr != nil || v.Verify() != nil || v.Submitter != c.sub.ID {
			t.Fatalf("kept a verdict that does not verify or is not the submitter's: %v", verr)
		}
		if r, ok := v.Replica("lease-me"); !ok || r.Output != outBad || r.Provider != c.me.ID {
			t.Fatalf("kept a verdict that does not name lease-me with its output: %+v", v.Replicas)
		}
	})
}
