package provider

import (
	"context"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
)

// memoryLedger is ledgertest.Memory with the ledger's All.
type memoryLedger struct{ *ledgertest.Memory }

func (m memoryLedger) All(context.Context) ([]ledger.Entry, error) { return m.Entries(), nil }

// appendChain stores receipts both parties signed.
func appendChain(t *testing.T, led *ledgertest.Memory, chain []ledger.Receipt) {
	t.Helper()
	for _, r := range chain {
		if _, err := led.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// The live leases are the role's runners, each with its job, submitter,
// GPUs, phase, limit and checkpoint, billed by the ledger's one sum over
// the receipts signed so far.
func TestLeaseQueryLive(t *testing.T) {
	prov, sub := wiretest.FreshParty(t), wiretest.FreshParty(t)
	led := &ledgertest.Memory{}
	p := newTestProvider(t, prov, Config{}, &absent{}, &unpins{}, &statetest.Records{}, led)
	terms := wiretest.Terms(prov.ID, sub.ID)
	p.d.GPUs = []exec.GPU{{UUID: terms.GPUs[0], Model: "RTX 4090"}, {UUID: terms.GPUs[1], Model: "RTX 4090"}}
	q := NewLeaseQuery(p, memoryLedger{led})

	got, err := q.Live(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("no lease: %+v, %v", got, err)
	}

	start := wiretest.Time.Add(2 * time.Second)
	ckpt := start.Add(90 * time.Second)
	decl := market.NewDeclaration("train-llm", []string{"true"}, 2, 8*market.Hour, nil)
	r := p.newRunner(&Record{
		Lease: wiretest.SignedLease(t, prov, sub), Declaration: decl, State: Running,
		Start: start, RunStart: start.Add(time.Minute), CheckpointAt: ckpt, CheckpointN: 3,
	}, sub.ID)
	p.leases.add(r)

	got, err = q.Live(context.Background())
	if err != nil || len(got) != 1 {
		t.Fatalf("one lease: %+v, %v", got, err)
	}
	l := got[0]
	want := api.Lease{
		ID: terms.ID, Job: terms.Job, Name: "train-llm", Submitter: sub.ID.String(),
		GPUs: []api.LeaseGPU{{UUID: terms.GPUs[0], Model: "RTX 4090"}, {UUID: terms.GPUs[1], Model: "RTX 4090"}},
		CPUs: terms.CPUs, MemoryBytes: terms.MemoryBytes, HeldSince: start, Limit: 8 * 3600,
		Phase: "running", RunStart: start.Add(time.Minute), CheckpointAt: ckpt, Checkpoints: 3,
	}
	if l.ID != want.ID || l.Job != want.Job || l.Name != want.Name || l.Submitter != want.Submitter ||
		len(l.GPUs) != 2 || l.GPUs[0] != want.GPUs[0] || l.GPUs[1] != want.GPUs[1] || l.CPUs != want.CPUs ||
		l.MemoryBytes != want.MemoryBytes || !l.HeldSince.Equal(start) || l.Limit != want.Limit || l.Phase != want.Phase ||
		!l.CheckpointAt.Equal(ckpt) || l.Checkpoints != 3 || l.Billed != (api.LeaseBilled{}) {
		t.Fatalf("lease before any receipt:\n got %+v\nwant %+v", l, want)
	}
	// Terms under the bound rule end the run at the proposal plus the
	// limit; older terms at the run's start plus the limit.
	if want := time.UnixMilli(terms.Proposed).Add(8 * time.Hour); terms.Bound == ledger.BoundRule && !l.EndsBy.Equal(want) {
		t.Errorf("ends by %v, want %v", l.EndsBy, want)
	} else if terms.Bound != ledger.BoundRule && !l.EndsBy.Equal(start.Add(time.Minute+8*time.Hour)) {
		t.Errorf("ends by %v, want the run's start plus the limit", l.EndsBy)
	}

	// Three interim receipts: the bill is Policy.Bill of the last.
	chain := ledgertest.Lease{ID: terms.ID, Job: terms.Job, Provider: ledgertest.Party{Key: prov.SK, ID: prov.ID},
		Submitter: ledgertest.Party{Key: sub.SK, ID: sub.ID}, GPUs: 2, GPUModel: "RTX 4090", From: start}.Chain(t, 3, nil)
	appendChain(t, led, chain)
	got, err = q.Live(context.Background())
	if err != nil || len(got) != 1 {
		t.Fatalf("one lease: %+v, %v", got, err)
	}
	bill := ledger.DefaultPolicy().Bill(&chain[2], time.Time{})
	if b := got[0].Billed; !b.Until.Equal(chain[2].HeldUntil) || b.GPUHours != bill.GPUHours || b.OwedGPUHours != bill.OwedGPUHours || b.Own {
		t.Fatalf("billed %+v, want %+v until %v", b, bill, chain[2].HeldUntil)
	}
	if b := got[0].Billed; b.GPUHours < 0.099 || b.GPUHours > 0.101 || b.OwedGPUHours != b.GPUHours {
		t.Fatalf("billed %+v, want 2 GPUs × 3 minutes = 0.1 GPU-h, all owed so far", b)
	}
}

// The history lists the leases this node provided that have ended, the
// newest first, each billed as usage bills it; a live lease, a lease of
// another provider's and those held before since are left out.
func TestLeaseQueryHistory(t *testing.T) {
	prov, sub, other := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	lp, ls := ledgertest.Party{Key: prov.SK, ID: prov.ID}, ledgertest.Party{Key: sub.SK, ID: sub.ID}
	led := &ledgertest.Memory{}
	p := newTestProvider(t, prov, Config{}, &absent{}, &unpins{}, &statetest.Records{}, led)
	q := NewLeaseQuery(p, memoryLedger{led})
	t0 := time.UnixMilli(1767225600000)
	done := ledger.Cause{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}
	lost := ledger.Cause{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider}
	completed := ledgertest.Lease{ID: "lcompleted", Job: "job-a", Provider: lp, Submitter: ls, GPUs: 1, GPUModel: "RTX 4090", From: t0}
	appendChain(t, led, completed.Chain(t, 4, &done))
	provLost := ledgertest.Lease{ID: "lprovlost", Job: "job-b", Provider: lp, Submitter: ls, GPUs: 2, GPUModel: "RTX 4090", From: t0.Add(time.Hour)}
	appendChain(t, led, provLost.Chain(t, 2, &lost))
	running := ledgertest.Lease{ID: "lrunning", Job: "job-c", Provider: lp, Submitter: ls, GPUs: 1, From: t0.Add(2 * time.Hour)}
	appendChain(t, led, running.Chain(t, 2, nil))
	theirs := ledgertest.Lease{ID: "ltheirs", Job: "job-d", Provider: ledgertest.Party{Key: other.SK, ID: other.ID}, Submitter: lp, GPUs: 1, From: t0}
	appendChain(t, led, theirs.Chain(t, 2, &done))

	got, err := q.History(context.Background(), api.LeasesQuery{})
	if err != nil || len(got) != 2 {
		t.Fatalf("history: %+v, %v", got, err)
	}
	if got[0].ID != "lprovlost" || got[1].ID != "lcompleted" {
		t.Fatalf("order %s, %s: want the newest first", got[0].ID, got[1].ID)
	}
	c := got[1]
	if c.Job != "job-a" || c.Submitter != sub.ID.String() || c.GPUs != 1 || c.GPUModel != "RTX 4090" ||
		!c.HeldFrom.Equal(t0) || !c.HeldUntil.Equal(t0.Add(4*time.Minute)) || c.Outcome != "completed" ||
		c.Attribution != "job" || c.Record != string(ledger.SettlementTwoSided) {
		t.Fatalf("completed lease: %+v", c)
	}
	usage := ledger.SumEntries(led.Entries(), ledger.DefaultPolicy(), func(job string) bool { return job == "job-a" })
	if c.Billed.GPUHours != usage.GPUHours || c.Billed.OwedGPUHours != usage.OwedGPUHours || usage.GPUHours == 0 {
		t.Fatalf("completed lease billed %+v, usage sums %+v", c.Billed, usage)
	}
	if l := got[0]; l.Billed.GPUHours == 0 || l.Billed.OwedGPUHours != 0 {
		t.Fatalf("a lease its provider lost is held and owed nothing: %+v", l.Billed)
	}

	if got, err = q.History(context.Background(), api.LeasesQuery{Max: 1}); err != nil || len(got) != 1 || got[0].ID != "lprovlost" {
		t.Fatalf("max 1: %+v, %v", got, err)
	}
	if got, err = q.History(context.Background(), api.LeasesQuery{Since: t0.Add(30 * time.Minute)}); err != nil || len(got) != 1 || got[0].ID != "lprovlost" {
		t.Fatalf("since: %+v, %v", got, err)
	}
}
