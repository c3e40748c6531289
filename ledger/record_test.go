package ledger

import (
	"context"
	"testing"
	"time"
)

func TestProviderRecords(t *testing.T) {
	ctx := context.Background()
	sub, provs := newParty(t, 2), providers(t, 3)
	a, b := provs[0], provs[1]
	l := openMem(t, Options{Self: sub.id})
	// a: lease-a completed (first receipt one minute in), lease-x failed
	// at the GPU probe, lease-y an interim receipt 3 minutes in; b:
	// lease-b completed.
	mustAppend(t, l, finalWith(t, "lease-a", "job-1", a, sub, cidA), finalWith(t, "lease-b", "job-1", b, sub, cidB))
	probe := final(interim("lease-x", "job-2", a, sub, 0, ""))
	probe.Outcome, probe.Attribution, probe.Reason, probe.ExitCode, probe.Output = OutcomeFailed, AttributionProvider, "gpu probe failed: device 0 is not an NVIDIA H100", nil, ""
	mustAppend(t, l, sign(t, probe, a, sub))
	open := interim("lease-y", "job-3", a, sub, 2, "")
	open.Seq, open.Prev = 0, ""
	mustAppend(t, l, sign(t, open, a, sub))
	// A verdict: b's output won over a's (with a third replica).
	c := provs[2]
	v := NewVerdict("job-1", sub.id, CompareOutput, []VerdictReplica{
		{Lease: "lease-a", Provider: a.id, Output: cidA, Compared: cidA},
		{Lease: "lease-b", Provider: b.id, Output: cidB, Compared: cidB},
		{Lease: "lease-c", Provider: c.id, Output: cidB, Compared: cidB},
	}, t0.Add(time.Hour))
	if err := v.Sign(sub.sk); err != nil {
		t.Fatal(err)
	}
	if err := l.KeepVerdict(ctx, v); err != nil {
		t.Fatal(err)
	}
	recs, err := l.ProviderRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ra, rb, rc := recs[a.id], recs[b.id], recs[c.id]
	want := ProviderRecord{Provider: a.id, Leases: 3, Completed: 1, ProviderCaused: 1, VerificationLosses: 1,
		GPUProbeFailures: 1, MedianFirstReceipt: time.Minute}
	if ra != want {
		t.Errorf("a: %+v\nwant %+v", ra, want)
	}
	if rb.Leases != 1 || rb.Completed != 1 || rb.VerificationWins != 1 || rb.Bad() != 0 {
		t.Errorf("b: %+v, want one completed lease and one win", rb)
	}
	if rc.Leases != 0 || rc.VerificationWins != 1 {
		t.Errorf("c, known by the verdict alone: %+v", rc)
	}
	for _, s := range []struct{ got, want string }{
		{ra.Score(), "1 ok/2 bad"}, {rb.Score(), "1 ok/0 bad"}, {ProviderRecord{}.Score(), "new"},
	} {
		if s.got != s.want {
			t.Errorf("score %q, want %q", s.got, s.want)
		}
	}
}

// The time to a first receipt counts from the proposal where the lease's
// terms are kept, from the receipt's own start otherwise.
func TestProviderRecordFirstReceiptFromProposal(t *testing.T) {
	ctx := context.Background()
	sub, prov := newParty(t, 2), newParty(t, 10)
	l := openMem(t, Options{Self: sub.id})
	if err := l.KeepLease(ctx, evidenceOf(t, "lease-a", "job-1", prov, sub, 2, t0.Add(-30*time.Second), time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, finalWith(t, "lease-a", "job-1", prov, sub, cidA))
	recs, err := l.ProviderRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[prov.id].MedianFirstReceipt; got != 90*time.Second {
		t.Errorf("first receipt after %v, want 1m30s (30s from proposal to start, 1m held)", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{3}, 3}, {[]time.Duration{5, 1, 3}, 3}, {[]time.Duration{4, 1, 2, 8}, 3}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
