package ledger

import (
	"context"
	"testing"
	"time"
)

// HeldByJobs remembers what it counted, and each kind of write to a job
// (a receipt, a one-sided record, the two-sided final that supersedes it)
// shows in the next sum; a job that was not written keeps its sum.
func TestHeldByJobsFollowsWrites(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	held := func(job string) JobHeld {
		t.Helper()
		h, err := l.HeldByJobs(ctx, DefaultPolicy(), job)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	chain := leaseChain(t, "lease-1", "job-1", prov, sub, 3, false)
	mustAppend(t, l, chain[:2]...)
	other := leaseChain(t, "lease-2", "job-2", prov, sub, 1, true)
	mustAppend(t, l, other...)
	if h := held("job-1"); h.Held != 2*time.Minute {
		t.Fatalf("after two interim receipts: held %v, want 2m", h.Held)
	}
	if h := held("job-2"); h.Held != time.Minute || h.OwedGPUHours != h.GPUHours {
		t.Fatalf("job-2: %+v, want 1m held, all owed", h)
	}

	mustAppend(t, l, chain[2])
	if h := held("job-1"); h.Held != 3*time.Minute || h.OneSidedGPUHours != 0 {
		t.Fatalf("after the third receipt: %+v, want 3m held, none one-sided", h)
	}

	rec := oneSided(t, interim("lease-1", "job-1", prov, sub, 3, chain[2].Digest()), SignerSubmitter, prov, sub,
		OutcomeProviderLost, AttributionProvider)
	if _, err := l.AppendOneSided(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if h := held("job-1"); h.Held != 4*time.Minute || h.OneSidedGPUHours != h.GPUHours || h.OwedGPUHours != 0 {
		t.Fatalf("after a one-sided provider-lost record: %+v, want 4m held, all one-sided, none owed", h)
	}

	fin := sign(t, final(interim("lease-1", "job-1", prov, sub, 3, chain[2].Digest())), prov, sub)
	mustAppend(t, l, fin)
	if h := held("job-1"); h.OneSidedGPUHours != 0 || h.OwedGPUHours != h.GPUHours || len(h.Providers) != 1 {
		t.Fatalf("after the two-sided final: %+v, want none one-sided, all owed", h)
	}
	both, err := l.HeldByJobs(ctx, DefaultPolicy(), "job-1", "job-2")
	if err != nil {
		t.Fatal(err)
	}
	if both.Held != 5*time.Minute || len(both.Providers) != 1 {
		t.Fatalf("both jobs: %+v, want 5m held from one provider", both)
	}
}

// A sum read while a commit of the same job lands is not kept.
func TestHeldCacheKeepsNoRacedRead(t *testing.T) {
	var c heldCache
	_, gen, ok := c.get("job")
	if ok {
		t.Fatal("empty cache holds a job")
	}
	c.forget([]string{"job"})
	c.put("job", []countedLease{{}}, gen)
	if _, _, ok := c.get("job"); ok {
		t.Fatal("a read that raced a commit was kept")
	}
	_, gen, _ = c.get("job")
	c.put("job", []countedLease{{}}, gen)
	if ls, _, ok := c.get("job"); !ok || len(ls) != 1 {
		t.Fatal("a read with no commit beside it was not kept")
	}
}
