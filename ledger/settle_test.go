package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// evidence signs lease terms shaped like node/wire.go's with both keys.
func evidence(tb testing.TB, lease, job string, prov, sub party, gpus int) *LeaseEvidence {
	tb.Helper()
	uuids := make([]string, gpus)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08d", i)
	}
	terms, err := json.Marshal(map[string]any{
		"id": lease, "job": job, "provider": prov.id.String(), "submitter": sub.id.String(),
		"gpus": uuids, "cpus": 2, "memory_bytes": 1 << 30, "limit": "1h", "proposed": t0.UnixMilli(),
		"expires": t0.Add(time.Minute).UnixMilli(), "epoch": 7, "view_hash": "ab", "rank": 0,
	})
	if err != nil {
		tb.Fatal(err)
	}
	msg := append([]byte(leaseDomain), terms...)
	ev := &LeaseEvidence{Terms: terms}
	if ev.ProviderSig, err = prov.sk.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	if ev.SubmitterSig, err = sub.sk.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	return ev
}

// oneSided turns r into a final record signed by signer alone.
func oneSided(tb testing.TB, r Receipt, signer Signer, prov, sub party, outcome Outcome, attribution Attribution) Receipt {
	tb.Helper()
	r = final(r)
	r.Outcome, r.Attribution = outcome, attribution
	r.ProviderSig, r.SubmitterSig = nil, nil
	r.Signer = signer
	r.Evidence = evidence(tb, r.Lease, r.Job, prov, sub, r.GPUs)
	sk := prov.sk
	if signer == SignerSubmitter {
		sk = sub.sk
	}
	if err := r.SignOneSided(sk); err != nil {
		tb.Fatal(err)
	}
	return r
}

// providerOnly is a final receipt the provider signed and the submitter
// would not countersign.
func providerOnly(tb testing.TB, r Receipt, prov party) Receipt {
	tb.Helper()
	r = final(r)
	if err := r.SignProvider(prov.sk); err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestEvidenceVerify(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	ev := evidence(t, "lease-1", "job-1", prov, sub, 2)
	if err := ev.Verify(); err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "lease-1" || ev.Job() != "job-1" || ev.Provider() != prov.id || ev.Submitter() != sub.id {
		t.Fatalf("accessors: %q %q %s %s", ev.ID(), ev.Job(), ev.Provider(), ev.Submitter())
	}
	for name, f := range map[string]func(*LeaseEvidence){
		"terms edited":      func(e *LeaseEvidence) { e.Terms = bytes.Replace(e.Terms, []byte(`"cpus":2`), []byte(`"cpus":3`), 1) },
		"provider unsigned": func(e *LeaseEvidence) { e.ProviderSig = nil },
		"submitter forged": func(e *LeaseEvidence) {
			e.SubmitterSig, _ = other.sk.Sign(append([]byte(leaseDomain), e.Terms...))
		},
		"signatures swapped": func(e *LeaseEvidence) { e.ProviderSig, e.SubmitterSig = e.SubmitterSig, e.ProviderSig },
		"not json":           func(e *LeaseEvidence) { e.Terms = []byte("nope") },
	} {
		e := *evidence(t, "lease-1", "job-1", prov, sub, 2)
		f(&e)
		if err := e.Verify(); err == nil {
			t.Errorf("%s: verifies", name)
		}
	}
}

func TestOneSidedSignVerify(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := interim("lease-1", "job-1", prov, sub, 3, strings.Repeat("0", 64))
	base.GPUModel = "H100"
	r := oneSided(t, base, SignerSubmitter, prov, sub, OutcomeProviderLost, AttributionProvider)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.SigningBytes(), []byte(recordDomain)) || len(r.ProviderSig) != 0 {
		t.Fatal("one-sided record not signed under its own domain by the submitter alone")
	}
	// JSON round trip keeps it verifiable and marked.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"signer":"submitter"`)) {
		t.Errorf("JSON does not mark the record one-sided: %s", b)
	}
	got, err := DecodeReceipt(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(); err != nil {
		t.Fatalf("after JSON: %v", err)
	}

	wrong := base
	wrong = final(wrong)
	wrong.Signer, wrong.Evidence = SignerProvider, evidence(t, "lease-1", "job-1", prov, sub, 2)
	if err := wrong.SignOneSided(sub.sk); !errors.Is(err, ErrWrongKey) {
		t.Errorf("signing as provider with the submitter's key: %v", err)
	}
	if err := r.Countersign(prov.sk); err == nil {
		t.Error("a one-sided record was countersigned")
	}

	tamper := map[string]func(*Receipt){
		"held until": func(r *Receipt) { r.HeldUntil = r.HeldUntil.Add(time.Hour) },
		"gpu model":  func(r *Receipt) { r.GPUModel = "A100" },
		"signer":     func(r *Receipt) { r.Signer = SignerProvider; r.ProviderSig, r.SubmitterSig = r.SubmitterSig, nil },
		"evidence terms": func(r *Receipt) {
			r.Evidence = evidence(t, "lease-1", "job-1", prov, sub, 2)
			r.Evidence.Terms = append(r.Evidence.Terms[:len(r.Evidence.Terms)-1], []byte(`,"x":1}`)...)
		},
		"evidence swapped": func(r *Receipt) { r.Evidence = evidence(t, "lease-1", "job-1", prov, other, 2) },
		"evidence of another lease": func(r *Receipt) {
			r.Evidence = evidence(t, "lease-2", "job-1", prov, sub, 2)
		},
		"second signature": func(r *Receipt) { r.ProviderSig = r.SubmitterSig },
	}
	for name, f := range tamper {
		c := r
		ev := *r.Evidence
		c.Evidence = &ev
		f(&c)
		if err := c.Verify(); err == nil {
			t.Errorf("%s: still verifies", name)
		}
	}
	// Evidence that verifies but names another lease is refused at signing.
	bad := final(base)
	bad.Signer, bad.Evidence = SignerProvider, evidence(t, "lease-9", "job-1", prov, sub, 2)
	if err := bad.SignOneSided(prov.sk); !errors.Is(err, ErrInvalidReceipt) {
		t.Errorf("signing with another lease's evidence: %v", err)
	}
}

// TestOneSidedJSONRoundTrip checks the decoder on records: what
// FuzzDecodeReceipt's seed corpus also feeds it.
func TestOneSidedJSONRoundTrip(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := oneSided(t, interim("lease-1", "job-1", prov, sub, 0, ""), SignerProvider, prov, sub, OutcomeProviderLost, AttributionProvider)
	b, _ := json.Marshal(r)
	for name, bad := range map[string][]byte{
		"unknown evidence field": bytes.Replace(b, []byte(`"terms":`), []byte(`"x":1,"terms":`), 1),
		"signer on interim":      bytes.Replace(b, []byte(`"final":true`), []byte(`"final":false`), 1),
		"unknown signer":         bytes.Replace(b, []byte(`"signer":"provider"`), []byte(`"signer":"network"`), 1),
		"no evidence":            bytes.Replace(b, []byte(`"evidence":{`), []byte(`"evidence":null,"e":{`), 1),
	} {
		if _, err := DecodeReceipt(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestGPUModelKeepsOldBytes(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := final(interim("lease-1", "job-1", prov, sub, 1, strings.Repeat("0", 64)))
	old := r.SigningBytes()
	r.GPUModel = "H100"
	if !bytes.HasPrefix(r.SigningBytes(), old) || bytes.Equal(r.SigningBytes(), old) {
		t.Fatal("a GPU model must extend the signing bytes, leaving a receipt without one unchanged")
	}
	r = sign(t, r, prov, sub)
	b, _ := json.Marshal(r)
	got, err := DecodeReceipt(b)
	if err != nil || got.GPUModel != "H100" || got.Verify() != nil {
		t.Fatalf("round trip: %v, model %q", err, got.GPUModel)
	}
	r.GPUModel = "bad\nmodel"
	if err := r.Validate(); err == nil {
		t.Error("control character in gpu_model accepted")
	}
}

func TestSettleTwoSidedSupersedes(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	chain := leaseChain(t, "lease-1", "job-1", prov, sub, 3, false)
	mustAppend(t, l, chain...)

	// The provider vanished: the submitter records the end alone.
	rec := oneSided(t, interim("lease-1", "job-1", prov, sub, 3, chain[2].Digest()), SignerSubmitter, prov, sub,
		OutcomeProviderLost, AttributionProvider)
	e1, err := l.AppendOneSided(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := l.AppendOneSided(ctx, rec); err != nil || again.Index != e1.Index {
		t.Fatalf("second append of the same record: %v, index %d want %d", err, again.Index, e1.Index)
	}
	lr, err := l.Lease(ctx, "lease-1")
	if err != nil {
		t.Fatal(err)
	}
	if lr.State != SettlementOneSided || len(lr.OneSided) != 1 || lr.Counted().Signer != SignerSubmitter {
		t.Fatalf("after one-sided record: %+v", lr.State)
	}
	if es, _ := l.ByLease(ctx, "lease-1"); len(es) != 3 {
		t.Fatalf("ByLease holds %d entries, want the 3 two-sided receipts", len(es))
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK || rep.OneSided != 1 || rep.Disputed != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}

	// Someone else's record is not ours to store.
	theirs := oneSided(t, interim("lease-1", "job-1", prov, sub, 3, chain[2].Digest()), SignerProvider, prov, sub,
		OutcomeCompleted, AttributionJob)
	if _, err := l.AppendOneSided(ctx, theirs); !errors.Is(err, ErrWrongKey) {
		t.Errorf("storing the counterpart's one-sided record: %v", err)
	}

	// The provider returns and both sign the final receipt.
	fin := sign(t, final(interim("lease-1", "job-1", prov, sub, 3, chain[2].Digest())), prov, sub)
	mustAppend(t, l, fin)
	lr, err = l.Lease(ctx, "lease-1")
	if err != nil {
		t.Fatal(err)
	}
	if lr.State != SettlementTwoSided || !lr.OneSided[0].Superseded || lr.Counted().OneSided() {
		t.Fatalf("after the two-sided final: state %s, superseded %v", lr.State, lr.OneSided[0].Superseded)
	}
	all, _ := l.All(ctx)
	if len(all) != 5 || !all[3].Superseded || all[4].Superseded {
		t.Fatalf("All: %d entries, superseded flags wrong", len(all))
	}
	if _, err := l.AppendOneSided(ctx, oneSided(t, rec, SignerSubmitter, prov, sub, OutcomeFailed, AttributionProvider)); !errors.Is(err, ErrConflict) {
		t.Errorf("one-sided record after settlement: %v, want ErrConflict", err)
	}
	rep, err = l.Verify(ctx)
	if err != nil || !rep.OK || rep.OneSided != 0 || rep.Entries != 5 {
		t.Fatalf("verify after settlement: %+v %v", rep, err)
	}
}

func TestSettleDispute(t *testing.T) {
	ctx := context.Background()
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	l := openMem(t, Options{Self: sub.id})
	chain := leaseChain(t, "lease-1", "job-1", prov, sub, 2, false)
	mustAppend(t, l, chain...)
	next := interim("lease-1", "job-1", prov, sub, 2, chain[1].Digest())
	ours := oneSided(t, next, SignerSubmitter, prov, sub, OutcomeProviderLost, AttributionProvider)
	mustOne := func(r Receipt) {
		if _, err := l.AppendOneSided(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mustOne(ours)

	longer := next
	longer.HeldUntil = longer.HeldUntil.Add(time.Hour)
	theirs := providerOnly(t, longer, prov)
	forged := final(longer)
	forged.ProviderSig, _ = other.sk.Sign(forged.SigningBytes())

	for name, tc := range map[string][2]Receipt{
		"same signer":   {ours, ours},
		"swapped roles": {theirs, ours},
		"both signed":   {ours, sign(t, final(longer), prov, sub)},
		"forged theirs": {ours, forged},
	} {
		if _, err := l.RecordDispute(ctx, "lease-1", tc[0], tc[1]); err == nil {
			t.Errorf("%s: dispute recorded", name)
		}
	}
	e, err := l.RecordDispute(ctx, "lease-1", ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if e.Dispute == nil || e.Dispute.Theirs.HeldUntil != msTime(longer.HeldUntil) {
		t.Fatalf("dispute entry: %+v", e)
	}
	lr, err := l.Lease(ctx, "lease-1")
	if err != nil {
		t.Fatal(err)
	}
	if lr.State != SettlementDisputed || len(lr.Disputes) != 1 || len(lr.OneSided) != 1 || len(lr.Receipts) != 2 {
		t.Fatalf("lease: %s, %d disputes", lr.State, len(lr.Disputes))
	}
	if got := lr.Counted(); got.HeldUntil != msTime(next.HeldUntil) {
		t.Errorf("a disputed lease counts %v, want this node's version %v", got.HeldUntil, next.HeldUntil)
	}
	if es, _ := l.ByJob(ctx, "job-1"); len(es) != 4 || es[3].Dispute == nil {
		t.Errorf("ByJob does not list the dispute")
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK || rep.Disputed != 1 || rep.OneSided != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// Reopened and settled after all: the dispute stays, superseded.
	mustAppend(t, l, sign(t, final(next), prov, sub))
	lr, _ = l.Lease(ctx, "lease-1")
	if lr.State != SettlementTwoSided || !lr.Disputes[0].Superseded {
		t.Fatalf("after settling: %s", lr.State)
	}
	if rep, _ := l.Verify(ctx); !rep.OK || rep.Disputed != 0 {
		t.Fatalf("verify after settling: %+v", rep)
	}
}

func TestVerifyDetectsEditedOneSidedAndDispute(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{})
	rec := oneSided(t, interim("lease-1", "job-1", prov, sub, 0, ""), SignerProvider, prov, sub, OutcomeWithdrawn, AttributionSubmitter)
	e1, err := l.AppendOneSided(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	theirs := oneSided(t, interim("lease-1", "job-1", prov, sub, 0, ""), SignerSubmitter, prov, sub, OutcomeProviderLost, AttributionProvider)
	e2, err := l.RecordDispute(ctx, "lease-1", rec, theirs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{e1, e2} {
		raw := rawEntry(t, l, e.Index)
		edited := bytes.Replace(raw, []byte(`"outcome":"withdrawn"`), []byte(`"outcome":"completed"`), 1)
		if bytes.Equal(raw, edited) {
			t.Fatalf("entry %d: nothing to edit", e.Index)
		}
		setRaw(t, l, entryKey(e.Index), edited)
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.FirstBad.Index != e.Index {
			t.Fatalf("edit of entry %d: %+v", e.Index, rep.FirstBad)
		}
		setRaw(t, l, entryKey(e.Index), raw)
	}
}

func exportOf(t *testing.T, l *Ledger, f ExportFilter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := l.Export(context.Background(), &buf, f); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportVerifyOffline(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: prov.id})
	c1 := leaseChain(t, "lease-1", "job-1", prov, sub, 3, true)
	mustAppend(t, l, c1...)
	c2 := leaseChain(t, "lease-2", "job-2", prov, sub, 2, false)
	mustAppend(t, l, c2...)
	rec := oneSided(t, interim("lease-2", "job-2", prov, sub, 2, c2[1].Digest()), SignerProvider, prov, sub, OutcomeOutputLost, AttributionProvider)
	if _, err := l.AppendOneSided(ctx, rec); err != nil {
		t.Fatal(err)
	}
	theirs := oneSided(t, interim("lease-2", "job-2", prov, sub, 2, c2[1].Digest()), SignerSubmitter, prov, sub, OutcomeWithdrawn, AttributionSubmitter)
	if _, err := l.RecordDispute(ctx, "lease-2", rec, theirs); err != nil {
		t.Fatal(err)
	}

	file := exportOf(t, l, ExportFilter{})
	rep, err := VerifyExport(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := ExportReport{Entries: 7, TwoSided: 5, OneSided: 1, Disputes: 1, Unbounded: 2}
	if rep.Held.Leases != 2 {
		t.Fatalf("held sum of %d leases, want 2", rep.Held.Leases)
	}
	want.Held = rep.Held
	if rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	if rep, err := VerifyExport(bytes.NewReader(exportOf(t, l, ExportFilter{Job: "job-1"}))); err != nil || rep.Entries != 3 {
		t.Fatalf("filtered export: %+v %v", rep, err)
	}

	for name, edit := range map[string][2]string{
		"held time":        {`"held_until":"2026-11-29T14:03:00.000Z"`, `"held_until":"2026-11-29T15:03:00.000Z"`},
		"outcome":          {`"outcome":"output-lost"`, `"outcome":"completed"`},
		"lease in dispute": {`"outcome":"withdrawn"`, `"outcome":"limit"`},
		"format":           {ExportFormat, "e31-receipts/2"},
		"extra field":      {`"index":1,`, `"index":1,"note":"x",`},
	} {
		bad := bytes.Replace(file, []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(bad, file) {
			t.Fatalf("%s: nothing replaced", name)
		}
		_, err := VerifyExport(bytes.NewReader(bad))
		if !errors.Is(err, ErrBadExport) {
			t.Errorf("%s: %v, want ErrBadExport", name, err)
		}
		if name == "outcome" && !strings.Contains(err.Error(), "lease lease-2") {
			t.Errorf("tampered entry not named: %v", err)
		}
	}
}

func FuzzVerifyExport(f *testing.F) {
	prov, sub := newParty(f, 1), newParty(f, 2)
	l := openMem(f, Options{})
	if err := l.KeepLease(context.Background(), evidenceOf(f, "lease-1", "job-1", prov, sub, 2, t0, time.Hour)); err != nil {
		f.Fatal(err)
	}
	mustAppend(f, l, leaseChain(f, "lease-1", "job-1", prov, sub, 2, true)...)
	rec := oneSided(f, interim("lease-2", "job-2", prov, sub, 0, ""), SignerProvider, prov, sub, OutcomeProviderLost, AttributionProvider)
	if _, err := l.AppendOneSided(context.Background(), rec); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := l.Export(context.Background(), &buf, ExportFilter{}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"e31-receipts/1","entries":[]}`))
	f.Add([]byte(`{"format":"e31-receipts/1","entries":[{"index":1,"receipt":null}]}`))
	f.Add([]byte(`{"format":"e31-receipts/1","entries":[{"index":1,"dispute":{"lease":"x","ours":{},"theirs":{}}}]}`))
	f.Add([]byte(`{"format":"e31-receipts/1","entries":[{"lease":{"terms":"{}","provider_sig":null,"submitter_sig":null}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyExport(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadExport) {
				t.Fatalf("error without ErrBadExport: %v", err)
			}
			return
		}
		if rep.Entries != rep.TwoSided+rep.OneSided+rep.Superseded+rep.Disputes {
			t.Fatalf("counts do not add up: %+v", rep)
		}
	})
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	prov, sub, sub2 := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	l := openMem(t, Options{Self: prov.id})
	// ended builds a lease of n receipts (2 GPUs, a minute each) whose
	// final receipt has the given ending, on the given model.
	ended := func(lease string, s party, n int, model string, outcome Outcome, attribution Attribution) []Receipt {
		var out []Receipt
		prev := ""
		for i := range n {
			r := interim(lease, "job-"+lease, prov, s, uint64(i), prev)
			r.GPUModel = model
			if i == n-1 && outcome != "" {
				r = final(r)
				r.Outcome, r.Attribution = outcome, attribution
			}
			r = sign(t, r, prov, s)
			prev = r.Digest()
			out = append(out, r)
		}
		return out
	}
	mustAppend(t, l, ended("a", sub, 3, "H100", OutcomeCompleted, AttributionJob)...)         // 2 GPUs × 3 min
	mustAppend(t, l, ended("b", sub, 6, "H100", OutcomeProviderLost, AttributionProvider)...) // 2 × 6, not owed
	mustAppend(t, l, ended("c", sub2, 2, "A100", OutcomeWithdrawn, AttributionSubmitter)...)  // 2 × 2
	mustAppend(t, l, ended("d", sub2, 4, "A100", "", "")...)                                  // open: 2 × 4
	// e: two interim receipts, then the submitter vanished; the provider's
	// one-sided record says 5 minutes.
	e := ended("e", sub, 2, "H100", "", "")
	mustAppend(t, l, e...)
	r := interim("e", "job-e", prov, sub, 4, e[1].Digest())
	r.GPUModel = "H100"
	if _, err := l.AppendOneSided(ctx, oneSided(t, r, SignerProvider, prov, sub, OutcomeFailed, AttributionJob)); err != nil {
		t.Fatal(err)
	}
	// f: one-sided, then settled by a shorter two-sided final: counted once.
	f := ended("f", sub, 1, "H100", "", "")
	mustAppend(t, l, f...)
	r = interim("f", "job-f", prov, sub, 9, f[0].Digest())
	r.GPUModel = "H100"
	if _, err := l.AppendOneSided(ctx, oneSided(t, r, SignerProvider, prov, sub, OutcomeCompleted, AttributionJob)); err != nil {
		t.Fatal(err)
	}
	fin := interim("f", "job-f", prov, sub, 1, f[0].Digest())
	fin.GPUModel = "H100"
	mustAppend(t, l, sign(t, final(fin), prov, sub))

	// g: the provider's own job on its own GPUs, completed: held, owed by
	// no one.
	mustAppend(t, l, ended("g", prov, 3, "H100", OutcomeCompleted, AttributionJob)...)

	hours := func(gpuMinutes float64) float64 { return gpuMinutes / 60 }
	for _, tc := range []struct {
		name   string
		filter UsageFilter
		policy Policy
		peer   map[string][3]float64 // peer seed → held, owed, one-sided GPU-hours
		model  map[string]float64
	}{
		{
			name: "default policy", policy: DefaultPolicy(),
			peer: map[string][3]float64{
				"sub":  {hours(2 * (3 + 6 + 5 + 2)), hours(2 * (3 + 5 + 2)), hours(2 * 5)},
				"sub2": {hours(2 * (2 + 4)), hours(2 * (2 + 4)), 0},
				"self": {hours(2 * 3), 0, 0},
			},
			model: map[string]float64{"H100": hours(2 * (3 + 6 + 5 + 2 + 3)), "A100": hours(2 * (2 + 4))},
		},
		{
			name: "nothing owed", policy: Policy{},
			peer: map[string][3]float64{
				"sub":  {hours(2 * 16), 0, hours(2 * 5)},
				"sub2": {hours(2 * 6), 0, 0},
				"self": {hours(2 * 3), 0, 0},
			},
			model: map[string]float64{"H100": hours(32 + 6), "A100": hours(12)},
		},
		{
			name: "one peer since minute 2", filter: UsageFilter{Peer: sub2.id, Since: t0.Add(2 * time.Minute)}, policy: DefaultPolicy(),
			peer:  map[string][3]float64{"sub2": {hours(2 * (0 + 2)), hours(2 * 2), 0}},
			model: map[string]float64{"A100": hours(4)},
		},
		{
			name: "two jobs", policy: DefaultPolicy(),
			filter: UsageFilter{Job: func(job string) bool { return job == "job-a" || job == "job-c" }},
			peer: map[string][3]float64{
				"sub":  {hours(2 * 3), hours(2 * 3), 0},
				"sub2": {hours(2 * 2), hours(2 * 2), 0},
			},
			model: map[string]float64{"H100": hours(2 * 3), "A100": hours(2 * 2)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := l.Usage(ctx, tc.filter, tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]string{string(sub.id): "sub", string(sub2.id): "sub2", string(prov.id): "self"}
			if len(rep.ByPeer) != len(tc.peer) {
				t.Fatalf("%d peers, want %d: %+v", len(rep.ByPeer), len(tc.peer), rep.ByPeer)
			}
			for _, p := range rep.ByPeer {
				want, ok := tc.peer[names[string(p.Peer)]]
				if wantRole := map[bool]string{true: RoleSelf, false: RoleSubmitter}[p.Peer == prov.id]; !ok || p.Role != wantRole {
					t.Fatalf("unexpected row %+v", p)
				}
				got := [3]float64{p.GPUHours, p.Owed, p.OneSided}
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-9 {
						t.Errorf("%s: held/owed/one-sided %v, want %v", names[string(p.Peer)], got, want)
						break
					}
				}
			}
			for _, m := range rep.ByModel {
				if math.Abs(m.GPUHours-tc.model[m.GPUModel]) > 1e-9 {
					t.Errorf("model %s: %v GPU-hours, want %v", m.GPUModel, m.GPUHours, tc.model[m.GPUModel])
				}
			}
			for _, row := range rep.Rows {
				if row.Basis == SettlementOneSided && row.Outcome != OutcomeFailed {
					t.Errorf("one-sided row %+v: only lease e is one-sided", row)
				}
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	for _, tc := range []struct {
		c    Cause
		owed bool
	}{
		{Cause{OutcomeCompleted, AttributionJob}, true},
		{Cause{OutcomeFailed, AttributionJob}, true},
		{Cause{OutcomeLimit, AttributionJob}, true},
		{Cause{OutcomeWithdrawn, AttributionSubmitter}, true},
		{Cause{OutcomeFailed, AttributionProvider}, false},
		{Cause{OutcomeFailed, AttributionNetwork}, false},
		{Cause{OutcomeProviderLost, AttributionProvider}, false},
		{Cause{OutcomeOutputLost, AttributionProvider}, false},
	} {
		if got := p.Owes(tc.c); got != tc.owed {
			t.Errorf("%+v: owed %v, want %v", tc.c, got, tc.owed)
		}
	}
}

// TestVerifyExportBatchesNameFirstForgery: an export long enough for
// several batches, with forged signatures in two of them, fails at the
// earlier one, inline and in parallel, counting only the entries before it.
func TestVerifyExportBatchesNameFirstForgery(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 9)
	const n = 3*sigChunk + 5
	bad := map[int]bool{sigChunk + 7: true, 2*sigChunk + 3: true}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"format":%q,"entries":[`, ExportFormat)
	for i := 1; i <= n; i++ {
		r := sign(t, interim(fmt.Sprintf("lease-%d", i), "job-1", prov, sub, 0, ""), prov, sub)
		if bad[i] {
			r.SubmitterSig, _ = other.sk.Sign(r.SigningBytes())
		}
		rj, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d,"receipt":%s}`, i, rj)
	}
	b.WriteString("]}")
	for _, workers := range []int{1, 4} {
		rep, err := verifyExport(bytes.NewReader(b.Bytes()), workers)
		if !errors.Is(err, ErrBadExport) || !strings.Contains(err.Error(), fmt.Sprintf("entry #%d (index %d, lease lease-%d, seq 0)", sigChunk+7, sigChunk+7, sigChunk+7)) {
			t.Fatalf("%d workers: %v", workers, err)
		}
		if want := (ExportReport{Entries: sigChunk + 6, TwoSided: sigChunk + 6}); rep != want {
			t.Fatalf("%d workers: report %+v, want %+v", workers, rep, want)
		}
	}
}
