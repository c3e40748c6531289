package ledger

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	cidA = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
	cidB = "bafybeihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	cidC = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"
)

// finalWith is the signed final receipt (seq 0) of a lease that gave
// output.
func finalWith(tb failer, lease, job string, prov, sub party, output string) Receipt {
	r := final(interim(lease, job, prov, sub, 0, ""))
	r.Output = output
	return sign(tb, r, prov, sub)
}

// signedVerdict is sub's signed verdict comparing outputs, one replica per
// provider, the i-th run under lease "lease-<i>" with outputs[i].
func signedVerdict(tb failer, sub party, provs []party, outputs ...string) Verdict {
	reps := make([]VerdictReplica, len(outputs))
	for i, o := range outputs {
		reps[i] = VerdictReplica{Lease: "lease-" + string(rune('a'+i)), Provider: provs[i].id, Output: o, Compared: o}
	}
	v := NewVerdict("job-1", sub.id, CompareOutput, reps, t0.Add(time.Hour))
	if err := v.Sign(sub.sk); err != nil {
		tb.Fatal(err)
	}
	return v
}

func providers(tb testing.TB, n int) []party {
	out := make([]party, n)
	for i := range out {
		out[i] = newParty(tb, byte(10+i))
	}
	return out
}

func TestVerdictMajority(t *testing.T) {
	sub, provs := newParty(t, 2), providers(t, 5)
	for _, c := range []struct {
		name    string
		outputs []string
		winner  string
		losers  int
	}{
		{"agree", []string{cidA, cidA}, cidA, 0},
		{"1-1", []string{cidA, cidB}, "", 0},
		{"2-1", []string{cidA, cidB, cidA}, cidA, 1},
		{"1-1-1", []string{cidA, cidB, cidC}, "", 0},
		{"2-2", []string{cidA, cidB, cidA, cidB}, "", 0},
		{"3-2", []string{cidB, cidA, cidA, cidB, cidA}, cidA, 2},
		{"2 and two empty", []string{cidA, "", cidA, ""}, "", 0},
		{"2 and one empty", []string{cidA, "", cidA}, cidA, 1},
	} {
		v := signedVerdict(t, sub, provs, c.outputs...)
		if v.Winner != c.winner {
			t.Errorf("%s: winner %q, want %q", c.name, v.Winner, c.winner)
		}
		if got := len(v.Losers()); got != c.losers {
			t.Errorf("%s: %d losers, want %d", c.name, got, c.losers)
		}
		if err := v.Verify(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	v := signedVerdict(t, sub, provs, cidA, cidB, cidA)
	if !v.Lost("lease-b") || v.Lost("lease-a") || v.Lost("lease-z") {
		t.Errorf("Lost: b %v a %v z %v, want only b", v.Lost("lease-b"), v.Lost("lease-a"), v.Lost("lease-z"))
	}
}

func TestVerdictTamperedFailsVerify(t *testing.T) {
	sub, provs := newParty(t, 2), providers(t, 3)
	good := signedVerdict(t, sub, provs, cidA, cidB, cidA)
	for name, edit := range map[string]func(v *Verdict){
		"job":            func(v *Verdict) { v.Job = "job-2" },
		"compare":        func(v *Verdict) { v.Compare = CompareCommand },
		"at":             func(v *Verdict) { v.At = v.At.Add(time.Millisecond) },
		"replica lease":  func(v *Verdict) { v.Replicas[0].Lease = "lease-x" },
		"replica output": func(v *Verdict) { v.Replicas[1].Output, v.Replicas[1].Compared = cidA, cidA },
		"provider":       func(v *Verdict) { v.Replicas[2].Provider = newParty(t, 40).id },
		"winner":         func(v *Verdict) { v.Winner = cidB },
		"no winner":      func(v *Verdict) { v.Winner = "" },
		"compared":       func(v *Verdict) { v.Replicas[0].Compared = cidC },
		"submitter":      func(v *Verdict) { v.Submitter = provs[0].id },
		"sig":            func(v *Verdict) { v.Sig[0] ^= 1 },
		"unsigned":       func(v *Verdict) { v.Sig = nil },
		"one replica":    func(v *Verdict) { v.Replicas = v.Replicas[:1] },
		"lease twice":    func(v *Verdict) { v.Replicas[1].Lease = v.Replicas[0].Lease },
		"provider twice": func(v *Verdict) { v.Replicas[1].Provider = v.Replicas[0].Provider },
	} {
		v := good
		v.Replicas = append([]VerdictReplica(nil), good.Replicas...)
		v.Sig = bytes.Clone(good.Sig)
		edit(&v)
		if err := v.Verify(); err == nil {
			t.Errorf("%s: tampered verdict verifies", name)
		}
	}
	if err := good.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestVerdictSignRefuses(t *testing.T) {
	sub, provs := newParty(t, 2), providers(t, 2)
	v := NewVerdict("job-1", sub.id, CompareOutput, []VerdictReplica{
		{Lease: "lease-a", Provider: provs[0].id, Output: cidA, Compared: cidA},
		{Lease: "lease-b", Provider: provs[1].id, Output: cidB, Compared: cidB},
	}, t0)
	if err := v.Sign(provs[0].sk); !errors.Is(err, ErrWrongKey) {
		t.Errorf("signed with another's key: %v, want ErrWrongKey", err)
	}
	bad := v
	bad.Replicas = append([]VerdictReplica(nil), v.Replicas...)
	bad.Replicas[0].Compared = "\x1b[2J"
	if err := bad.Sign(sub.sk); !errors.Is(err, ErrInvalidVerdict) {
		t.Errorf("compared holds a terminal control: %v, want ErrInvalidVerdict", err)
	}
	paths := NewVerdict("job-1", sub.id, "paths:result.csv,logs/\x1b]52;c;x\x07", v.Replicas, t0)
	if err := paths.Sign(sub.sk); !errors.Is(err, ErrInvalidVerdict) {
		t.Errorf("escape sequence in compare: %v, want ErrInvalidVerdict", err)
	}
}

func TestVerdictJSON(t *testing.T) {
	sub, provs := newParty(t, 2), providers(t, 3)
	v := signedVerdict(t, sub, provs, cidA, cidB, cidA)
	b, err := MarshalVerdict(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalVerdict(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(); err != nil {
		t.Fatalf("decoded verdict: %v", err)
	}
	if !bytes.Equal(got.SigningBytes(), v.SigningBytes()) {
		t.Error("the round trip changed the signing bytes")
	}
	for name, bad := range map[string][]byte{
		"unknown field":    bytes.Replace(b, []byte(`"job":`), []byte(`"x":1,"job":`), 1),
		"field twice":      bytes.Replace(b, []byte(`"job":"job-1"`), []byte(`"job":"job-1","job":"job-1"`), 1),
		"other case":       bytes.Replace(b, []byte(`"job":`), []byte(`"Job":`), 1),
		"replica field":    bytes.Replace(b, []byte(`"compared":`), []byte(`"y":2,"compared":`), 1),
		"trailing":         append(bytes.Clone(b), []byte(` {}`)...),
		"not majority":     bytes.Replace(b, []byte(`"winner":"`+cidA+`"`), []byte(`"winner":""`), 1),
		"below ms":         bytes.Replace(b, []byte(`.000Z"`), []byte(`.0001Z"`), 1),
		"oversized":        append(bytes.Clone(b), bytes.Repeat([]byte(" "), MaxVerdictSize)...),
		"control in value": bytes.Replace(b, []byte(`"compare":"output"`), []byte(`"compare":"paths:a\u001b[2J"`), 1),
	} {
		if _, err := UnmarshalVerdict(bad); !errors.Is(err, ErrInvalidVerdict) {
			t.Errorf("%s: %v, want ErrInvalidVerdict", name, err)
		}
	}
}

// FuzzUnmarshalVerdict checks that whatever UnmarshalVerdict accepts is
// valid and survives a round trip with its signing bytes intact, and that
// no input makes decoding or verifying panic.
func FuzzUnmarshalVerdict(f *testing.F) {
	sub, provs := newParty(f, 2), providers(f, 3)
	for _, outs := range [][]string{{cidA, cidA}, {cidA, cidB, cidA}, {cidA, cidB}} {
		b, err := MarshalVerdict(signedVerdict(f, sub, provs, outs...))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := UnmarshalVerdict(data)
		if err != nil {
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted an invalid verdict: %v", err)
		}
		_ = v.Verify()
		b, err := MarshalVerdict(v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := UnmarshalVerdict(b)
		if err != nil {
			t.Fatalf("re-encoded verdict refused: %v", err)
		}
		if !bytes.Equal(w.SigningBytes(), v.SigningBytes()) || !bytes.Equal(w.Sig, v.Sig) {
			t.Fatal("round trip changed the verdict")
		}
	})
}

func TestKeepVerdict(t *testing.T) {
	ctx := context.Background()
	sub, provs := newParty(t, 2), providers(t, 3)
	l := openMem(t, Options{Self: sub.id})
	v := signedVerdict(t, sub, provs, cidA, cidB, cidA)
	for range 2 {
		if err := l.KeepVerdict(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	unsigned := v
	unsigned.Sig = nil
	if err := l.KeepVerdict(ctx, unsigned); err == nil {
		t.Error("kept an unsigned verdict")
	}
	vs, err := l.Verdicts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || !bytes.Equal(vs[0].SigningBytes(), v.SigningBytes()) {
		t.Fatalf("verdicts kept: %d, want the one verdict once", len(vs))
	}
}

// lostLedger is a submitter's ledger with three replicas of job-1, one
// of which (lease-b) lost, and the verdict saying so.
func lostLedger(t *testing.T) (*Ledger, Verdict, party) {
	t.Helper()
	sub, provs := newParty(t, 2), providers(t, 3)
	l := openMem(t, Options{Self: sub.id})
	outs := []string{cidA, cidB, cidA}
	for i, o := range outs {
		mustAppend(t, l, finalWith(t, "lease-"+string(rune('a'+i)), "job-1", provs[i], sub, o))
	}
	v := signedVerdict(t, sub, provs, outs...)
	return l, v, sub
}

func TestLostVerificationNotOwed(t *testing.T) {
	ctx := context.Background()
	l, v, _ := lostLedger(t)
	perLease := 2 * (time.Minute).Hours() // 2 GPUs for one minute
	check := func(when string, wantOwed, wantLost float64) {
		t.Helper()
		h, err := l.HeldByJobs(ctx, DefaultPolicy(), "job-1")
		if err != nil {
			t.Fatal(err)
		}
		u, err := l.Usage(ctx, UsageFilter{}, DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		es, err := l.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := l.Verdicts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sum := SumEntries(es, DefaultPolicy().WithLost(vs), nil)
		for name, s := range map[string]HeldSum{"HeldByJobs": h.HeldSum, "Usage": u.Total, "SumEntries": sum} {
			if math.Abs(s.OwedGPUHours-wantOwed) > 1e-9 || math.Abs(s.LostGPUHours-wantLost) > 1e-9 {
				t.Errorf("%s, %s: owed %v lost %v, want %v and %v", when, name, s.OwedGPUHours, s.LostGPUHours, wantOwed, wantLost)
			}
		}
		var rowsLost float64
		for _, r := range u.Rows {
			if r.LostVerification {
				rowsLost += r.GPUHours
				if r.Owed || r.OwedGPUHours != 0 {
					t.Errorf("%s: a lost row is owed: %+v", when, r)
				}
			}
		}
		if math.Abs(rowsLost-wantLost) > 1e-9 {
			t.Errorf("%s: rows lost %v, want %v", when, rowsLost, wantLost)
		}
	}
	check("before the verdict", 3*perLease, 0)
	if err := l.KeepVerdict(ctx, v); err != nil {
		t.Fatal(err)
	}
	check("after the verdict", 2*perLease, perLease)
	if !DefaultPolicy().Owes(Cause{OutcomeCompleted, AttributionJob}) {
		t.Fatal("the default policy no longer owes a completed lease")
	}
}

func TestExportVerdictRoundTrip(t *testing.T) {
	ctx := context.Background()
	l, v, _ := lostLedger(t)
	if err := l.KeepVerdict(ctx, v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := l.Export(ctx, &buf, ExportFilter{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"verdict":{`)) {
		t.Fatalf("export holds no verdict:\n%s", buf.Bytes())
	}
	rep, err := VerifyExport(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	perLease := 2 * time.Minute.Hours()
	if rep.Verdicts != 1 || rep.VerdictsWithoutReceipts != 0 || math.Abs(rep.Held.LostGPUHours-perLease) > 1e-9 ||
		math.Abs(rep.Held.OwedGPUHours-2*perLease) > 1e-9 {
		t.Errorf("report %+v: want 1 verdict checked against its receipts, one lease lost and two owed", rep)
	}

	// A selection of one lease carries the verdict without the others'
	// receipts: checked, and counted apart.
	buf.Reset()
	if _, err := l.Export(ctx, &buf, ExportFilter{Lease: "lease-b"}); err != nil {
		t.Fatal(err)
	}
	rep, err = VerifyExport(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdicts != 1 || rep.VerdictsWithoutReceipts != 1 {
		t.Errorf("selection: %+v, want 1 verdict, 1 without all its receipts", rep)
	}
}

func TestVerifyExportRefusesForgedVerdict(t *testing.T) {
	ctx := context.Background()
	l, _, sub := lostLedger(t)
	provs := providers(t, 3)
	// The submitter signs a verdict whose replica b names an output its
	// final receipt does not: b "agrees", a is made the loser.
	forged := signedVerdict(t, sub, provs, cidB, cidB, cidA)
	if err := l.KeepVerdict(ctx, forged); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := l.Export(ctx, &buf, ExportFilter{}); err != nil {
		t.Fatal(err)
	}
	_, err := VerifyExport(bytes.NewReader(buf.Bytes()))
	if !errors.Is(err, ErrBadExport) || !strings.Contains(err.Error(), "verdict on job-1") || !strings.Contains(err.Error(), "lease-a") {
		t.Fatalf("forged output: %v, want a bad export naming the job and the replica", err)
	}

	// An edited verdict in the file fails its signature.
	var good bytes.Buffer
	l2, v, _ := lostLedger(t)
	if err := l2.KeepVerdict(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Export(ctx, &good, ExportFilter{}); err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(good.Bytes(), []byte(`"job":"job-1","submitter"`), []byte(`"job":"job-9","submitter"`), 1)
	if _, err := VerifyExport(bytes.NewReader(edited)); !errors.Is(err, ErrBadExport) || !strings.Contains(err.Error(), "verdict on job-9") {
		t.Fatalf("edited verdict: %v, want a bad export naming it", err)
	}
}
