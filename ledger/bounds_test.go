package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
)

// evidenceOf returns lease terms shaped like the node's, signed by both
// parties: bounded (BoundRule) with the given limit when limit is set,
// as signed before the rule otherwise.
func evidenceOf(tb testing.TB, lease, job string, prov, sub party, gpus int, proposed time.Time, limit time.Duration) LeaseEvidence {
	tb.Helper()
	uuids := make([]string, gpus)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08d", i)
	}
	terms := map[string]any{
		"id": lease, "job": job, "provider": prov.id.String(), "submitter": sub.id.String(),
		"gpus": uuids, "proposed": proposed.UnixMilli(), "expires": proposed.Add(10 * time.Second).UnixMilli(),
	}
	if limit > 0 {
		terms["limit"] = market.Duration(limit.Milliseconds())
		terms["bound"] = BoundRule
	}
	b, err := json.Marshal(terms)
	if err != nil {
		tb.Fatal(err)
	}
	msg := append([]byte(leaseDomain), b...)
	ev := LeaseEvidence{Terms: b}
	if ev.ProviderSig, err = prov.sk.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	if ev.SubmitterSig, err = sub.sk.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	return ev
}

func TestHeldWindow(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	ev := evidenceOf(t, "lease-1", "job-1", prov, sub, 2, t0, time.Hour)
	terms, err := ev.Parse()
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour + MaxGrace + OutputAllowance + MaxClockSkew)
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     error
	}{
		{"the lease's hour", t0, t0.Add(time.Hour), nil},
		{"to the window's end", t0, end, nil},
		{"a skewed start", t0.Add(-MaxClockSkew), t0.Add(time.Minute), nil},
		{"a millisecond past the end", t0, end.Add(time.Millisecond), ErrOutsideLease},
		{"before the proposal", t0.Add(-MaxClockSkew - time.Second), t0.Add(time.Minute), ErrOutsideLease},
		{"from 1970", time.UnixMilli(0), t0.Add(time.Minute), ErrOutsideLease},
		{"ten times the limit", t0, t0.Add(10 * time.Hour), ErrOutsideLease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := interim("lease-1", "job-1", prov, sub, 0, "")
			r.HeldFrom, r.HeldUntil = msTime(tc.from), msTime(tc.to)
			if err := CheckHeld(&r, terms); !errors.Is(err, tc.want) {
				t.Fatalf("CheckHeld = %v, want %v", err, tc.want)
			}
		})
	}
	r := interim("lease-1", "job-2", prov, sub, 0, "")
	if err := CheckHeld(&r, terms); !errors.Is(err, ErrInvalidReceipt) {
		t.Fatalf("receipt of another job: %v, want ErrInvalidReceipt", err)
	}
	old := evidenceOf(t, "lease-1", "job-1", prov, sub, 2, t0, 0)
	ot, err := old.Parse()
	if err != nil {
		t.Fatal(err)
	}
	r = interim("lease-1", "job-1", prov, sub, 0, "")
	r.HeldFrom, r.HeldUntil = time.UnixMilli(0).UTC(), t0.Add(1000*time.Hour)
	if err := CheckHeld(&r, ot); err != nil {
		t.Fatalf("terms signed before the rule bound nothing, got %v", err)
	}
}

// TestAppendRefusesTimeTheLeaseDoesNotAllow: once a lease's terms are
// kept, a receipt past them is refused before the chain, and a one-sided
// record past its own evidence likewise.
func TestAppendRefusesTimeTheLeaseDoesNotAllow(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	ev := evidenceOf(t, "lease-1", "job-1", prov, sub, 2, t0, time.Minute)
	if err := l.KeepLease(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := l.KeepLease(ctx, ev); err != nil {
		t.Fatalf("keeping the same lease again: %v", err)
	}
	other := evidenceOf(t, "lease-1", "job-1", prov, sub, 2, t0, time.Hour)
	if err := l.KeepLease(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("other terms under the same ID: %v, want ErrConflict", err)
	}
	forged := ev
	forged.SubmitterSig = bytes.Clone(ev.ProviderSig)
	if err := l.KeepLease(ctx, forged); err == nil {
		t.Fatal("evidence with a forged signature kept")
	}

	ok := sign(t, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	mustAppend(t, l, ok)
	over := interim("lease-1", "job-1", prov, sub, 1, ok.Digest())
	over.HeldUntil = t0.Add(10 * time.Hour)
	over = sign(t, over, prov, sub)
	if _, err := l.Append(ctx, over); !errors.Is(err, ErrOutsideLease) {
		t.Fatalf("receipt ten hours into a one-minute lease: %v, want ErrOutsideLease", err)
	}

	rec := final(interim("lease-2", "job-2", prov, sub, 0, ""))
	rec.HeldUntil = t0.Add(time.Hour)
	rec.Phases = Phases{}
	rec.OutputWait = 0
	rec.Signer = SignerProvider
	ev2 := evidenceOf(t, "lease-2", "job-2", prov, sub, 2, t0, time.Minute)
	rec.Evidence = &ev2
	if err := rec.SignOneSided(prov.sk); !errors.Is(err, ErrOutsideLease) {
		t.Fatalf("one-sided record an hour into a one-minute lease signed: %v", err)
	}
	rep := mustVerify(t, l)
	if rep.Unbounded != 0 || !rep.OK {
		t.Fatalf("report %+v, want OK with no unbounded lease", rep)
	}
}

// TestVerifyChecksKeptLeases: a ledger whose receipts exceed the terms
// kept for their lease fails Verify at that entry; one kept before the
// rule verifies, its leases counted unbounded.
func TestVerifyChecksKeptLeases(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	chain := leaseChain(t, "lease-1", "job-1", prov, sub, 3, true) // held to t0+3m
	mustAppend(t, l, chain...)
	if rep := mustVerify(t, l); !rep.OK || rep.Unbounded != 1 {
		t.Fatalf("a ledger kept before the rule: %+v, want OK with 1 unbounded lease", rep)
	}
	// The terms arrive later (as a tampered or restored store might hold
	// them): a one-minute lease cannot hold three minutes past the
	// allowances, so a receipt held to t0+30m is caught.
	r := interim("lease-2", "job-2", prov, sub, 0, "")
	r.HeldUntil = t0.Add(30 * time.Minute)
	mustAppend(t, l, sign(t, r, prov, sub))
	if err := l.KeepLease(ctx, evidenceOf(t, "lease-2", "job-2", prov, sub, 2, t0, time.Minute)); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.FirstBad == nil || rep.FirstBad.Problem != ProblemOutsideLease || rep.FirstBad.Lease != "lease-2" {
		t.Fatalf("report %+v (first bad %+v), want lease-2 outside its lease", rep, rep.FirstBad)
	}
}

// TestExportCarriesLeases: an export holds each kept lease before its
// receipts, VerifyExport checks the receipts against it, and a file whose
// receipt claims more than its lease allows is refused.
func TestExportCarriesLeases(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	if err := l.KeepLease(ctx, evidenceOf(t, "lease-1", "job-1", prov, sub, 2, t0, time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, leaseChain(t, "lease-1", "job-1", prov, sub, 3, true)...)
	mustAppend(t, l, leaseChain(t, "lease-2", "job-2", prov, sub, 2, true)...)
	file := exportOf(t, l, ExportFilter{})
	if n := strings.Count(string(file), `"lease":{`); n != 1 {
		t.Fatalf("export holds %d leases, want 1:\n%s", n, file)
	}
	rep, err := VerifyExport(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ExportReport{Entries: 5, TwoSided: 5, Leases: 1, Unbounded: 1, Held: rep.Held}); rep != want || rep.Held.Leases != 2 {
		t.Fatalf("report %+v, want %+v", rep, want)
	}

	// The same receipts under one-minute terms: the third minute of
	// lease-1 is within the allowances, but a receipt ten hours long is not.
	x := openMem(t, Options{Self: sub.id})
	if err := x.KeepLease(ctx, evidenceOf(t, "lease-3", "job-3", prov, sub, 2, t0, time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, leaseChain(t, "lease-3", "job-3", prov, sub, 2, false)...)
	good := exportOf(t, x, ExportFilter{})
	over := interim("lease-3", "job-3", prov, sub, 0, "")
	over.HeldUntil = t0.Add(10 * time.Hour)
	over = sign(t, over, prov, sub)
	ob, err := over.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// Swap the export's first receipt for the overlong one.
	var doc struct {
		Format  string            `json:"format"`
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Entries[1] = json.RawMessage(fmt.Sprintf(`{"index":1,"receipt":%s}`, ob))
	bad, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyExport(bytes.NewReader(bad)); !errors.Is(err, ErrBadExport) || !strings.Contains(err.Error(), "outside what the lease allows") {
		t.Fatalf("export with a receipt past its lease: %v", err)
	}
}
