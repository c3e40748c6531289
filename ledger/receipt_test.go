package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestSignCountersignVerify(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	for _, r := range []Receipt{
		interim("lease-1", "job-1", prov, sub, 0, ""),
		final(interim("lease-1", "job-1", prov, sub, 3, hex.EncodeToString(make([]byte, 32)))),
	} {
		r = sign(t, r, prov, sub)
		if err := r.Verify(); err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeReceipt(data)
		if err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if err := back.Verify(); err != nil {
			t.Fatalf("after JSON round trip: %v", err)
		}
		if !bytes.Equal(back.SigningBytes(), r.SigningBytes()) {
			t.Fatal("JSON round trip changed the signing bytes")
		}
	}
}

func TestSubMillisecondTimesSurviveJSON(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	r.HeldFrom = r.HeldFrom.Add(123456789 * time.Nanosecond).In(time.FixedZone("X", 3600))
	r.HeldUntil = r.HeldUntil.Add(987654321 * time.Nanosecond)
	r = sign(t, r, prov, sub)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeReceipt(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	if got, want := back.HeldFrom.Format(timeLayout), "2026-11-29T14:00:00.123Z"; got != want {
		t.Fatalf("held_from %s, want %s", got, want)
	}
}

func TestUnsignedRefused(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	if err := r.Verify(); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("no signatures: %v, want ErrUnsigned", err)
	}
	if err := r.Countersign(sub.sk); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("countersign before the provider: %v, want ErrUnsigned", err)
	}
	if err := r.SignProvider(prov.sk); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("provider only: %v, want ErrUnsigned", err)
	}
}

func TestWrongKeyRefused(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	if err := r.SignProvider(sub.sk); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("provider signing with the submitter's key: %v, want ErrWrongKey", err)
	}
	if err := r.SignProvider(prov.sk); err != nil {
		t.Fatal(err)
	}
	if err := r.Countersign(other.sk); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("countersign with a stranger's key: %v, want ErrWrongKey", err)
	}
}

func TestForgedSignatureRefused(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	r := sign(t, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	// A valid signature over the right bytes, by the wrong peer.
	forged, err := other.sk.Sign(r.SigningBytes())
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]func(*Receipt){
		"provider":  func(r *Receipt) { r.ProviderSig = forged },
		"submitter": func(r *Receipt) { r.SubmitterSig = forged },
		"swapped":   func(r *Receipt) { r.ProviderSig, r.SubmitterSig = r.SubmitterSig, r.ProviderSig },
		"truncated": func(r *Receipt) { r.ProviderSig = r.ProviderSig[:63] },
	} {
		c := r
		set(&c)
		if err := c.Verify(); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}

// TestTamperAnyFieldBreaksVerify changes every signed field in turn. The
// reflection check makes a field added to Receipt without a case here (and
// so, likely, without a place in SigningBytes) fail the test.
func TestTamperAnyFieldBreaksVerify(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := sign(t, final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32)))), prov, sub)
	seven := 7
	tamper := map[string]func(*Receipt){
		"Lease":        func(r *Receipt) { r.Lease = "lease-2" },
		"Job":          func(r *Receipt) { r.Job = "job-2" },
		"Provider":     func(r *Receipt) { r.Provider = other.id },
		"Submitter":    func(r *Receipt) { r.Submitter = other.id },
		"GPUs":         func(r *Receipt) { r.GPUs = 8 },
		"Seq":          func(r *Receipt) { r.Seq = 2 },
		"Final":        func(r *Receipt) { r.Final = false },
		"HeldFrom":     func(r *Receipt) { r.HeldFrom = r.HeldFrom.Add(-time.Millisecond) },
		"HeldUntil":    func(r *Receipt) { r.HeldUntil = r.HeldUntil.Add(time.Hour) },
		"Phase":        func(r *Receipt) { r.Phase = PhaseRun },
		"Prev":         func(r *Receipt) { r.Prev = hex.EncodeToString(bytes.Repeat([]byte{1}, 32)) },
		"Outcome":      func(r *Receipt) { r.Outcome = OutcomeFailed },
		"Attribution":  func(r *Receipt) { r.Attribution = AttributionProvider },
		"ExitCode":     func(r *Receipt) { r.ExitCode = &seven },
		"Reason":       func(r *Receipt) { r.Reason = "exited 7" },
		"Phases":       func(r *Receipt) { r.Phases.Run++ },
		"Output":       func(r *Receipt) { r.Output = "bafkqaaa" },
		"Checkpoint":   func(r *Receipt) { r.Checkpoint = "" },
		"OutputWait":   func(r *Receipt) { r.OutputWait = 0 },
		"GPUModel":     func(r *Receipt) { r.GPUModel = "H100" },
		"GPUsSeen":     func(r *Receipt) { r.GPUsSeen = []GPUSeen{{UUID: "GPU-1", Model: "A10"}} },
		"Signer":       func(r *Receipt) { r.Signer = SignerProvider },
		"Relay":        func(r *Receipt) { r.Relay = other.id },
		"CheckpointAt": func(r *Receipt) { r.CheckpointAt = r.HeldFrom.Add(time.Second) },
		"CPUs":         func(r *Receipt) { r.CPUs = 4 },
		"MemoryBytes":  func(r *Receipt) { r.MemoryBytes = 8 << 30 },
		"DiskBytes":    func(r *Receipt) { r.DiskBytes = 10 << 30 },
	}
	// Evidence is signed on one-sided records only, where
	// TestOneSidedTamperBreaksVerify changes it.
	// made is this process's note of what it signed, bound to the signed
	// bytes; TestAppendRechecksWhatChangedAfterSigning tampers around it.
	unsigned := map[string]bool{"ProviderSig": true, "SubmitterSig": true, "Evidence": true, "made": true}
	rt := reflect.TypeFor[Receipt]()
	for i := range rt.NumField() {
		name := rt.Field(i).Name
		if _, ok := tamper[name]; !ok && !unsigned[name] {
			t.Errorf("field %s has no tampering case", name)
		}
	}
	for name, f := range tamper {
		r := base
		f(&r)
		if bytes.Equal(r.SigningBytes(), base.SigningBytes()) {
			t.Errorf("%s: changing it leaves SigningBytes unchanged", name)
		}
		if err := r.Verify(); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: Verify after tampering: %v, want ErrBadSignature", name, err)
		}
	}
	// Presence of an exit code is signed, not only its value.
	r := base
	r.ExitCode = nil
	if err := r.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("exit code removed: %v, want ErrBadSignature", err)
	}
}

// TestSigningBytesStable pins the signing format: changing it would make
// every stored signature fail, so it must only change with a new domain.
func TestSigningBytesStable(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
	sb := r.SigningBytes()
	if !bytes.HasPrefix(sb, []byte("e31-receipt/1\n")) {
		t.Fatalf("signing bytes lack the domain prefix: %q", sb[:20])
	}
	sum := sha256.Sum256(sb)
	const want = "35f86516aa7cf81b2f4665f028e85412caab82a32e9ecb121487421f99f785a4"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("signing bytes changed: sha256 %s, want %s", got, want)
	}
}

func TestHeld(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := interim("lease-1", "job-1", prov, sub, 4, "")
	if got := r.Held(); got != 5*time.Minute {
		t.Fatalf("Held %v, want 5m", got)
	}
	if got := r.GPUSeconds(); got != 600 {
		t.Fatalf("GPUSeconds %v, want 600", got)
	}
}

// TestAppendRechecksWhatChangedAfterSigning: Append skips checking the
// signatures this process just made, but only while they cover exactly the
// receipt's bytes: any change after signing is checked and refused.
func TestAppendRechecksWhatChangedAfterSigning(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := sign(t, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	if base.made == nil || !base.made.has(SignerProvider, base.SigningBytes(), base.ProviderSig) ||
		!base.made.has(SignerSubmitter, base.SigningBytes(), base.SubmitterSig) {
		t.Fatal("signing here is not noted")
	}
	forged, err := other.sk.Sign(base.SigningBytes())
	if err != nil {
		t.Fatal(err)
	}
	l := openMem(t, Options{})
	for name, f := range map[string]func(*Receipt){
		"field":           func(r *Receipt) { r.GPUs = 8 },
		"provider sig":    func(r *Receipt) { r.ProviderSig = forged },
		"submitter sig":   func(r *Receipt) { r.SubmitterSig = forged },
		"swapped":         func(r *Receipt) { r.ProviderSig, r.SubmitterSig = r.SubmitterSig, r.ProviderSig },
		"sig edited here": func(r *Receipt) { r.ProviderSig = bytes.Clone(r.ProviderSig); r.ProviderSig[5] ^= 1 },
	} {
		r := base
		f(&r)
		if _, err := l.Append(context.Background(), r); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	if _, err := l.Append(context.Background(), base); err != nil {
		t.Fatalf("untouched: %v", err)
	}
}

// TestSignRefusesKeyWithForeignPublicHalf: a private key whose public half
// is not derived from its seed would sign for a peer ID it cannot sign for.
func TestSignRefusesKeyWithForeignPublicHalf(t *testing.T) {
	prov, sub, other := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	bad := prov.withForeignHalf(t, other)
	r := interim("lease-1", "job-1", other, sub, 0, "")
	if err := r.SignProvider(bad); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("sign with a key whose halves disagree: %v, want ErrWrongKey", err)
	}
}
