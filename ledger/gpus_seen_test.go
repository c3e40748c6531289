package ledger

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The GPUs a run saw are signed by both sides, survive JSON, and leave the
// bytes of receipts without them as they were.
func TestGPUsSeenSignedAndKept(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	base := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
	plain := base.SigningBytes()

	r := base
	r.GPUsSeen = []GPUSeen{{UUID: "GPU-1", Model: "NVIDIA A10"}, {UUID: "GPU-2", Model: "NVIDIA A10"}}
	r = sign(t, r, prov, sub)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.SigningBytes(), plain) || len(r.SigningBytes()) == len(plain) {
		t.Fatal("the list is not a tail after the old encoding")
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"gpus_seen":[{"uuid":"GPU-1","model":"NVIDIA A10"}`) {
		t.Fatalf("json: %s", data)
	}
	back, err := DecodeReceipt(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil || len(back.GPUsSeen) != 2 {
		t.Fatalf("round trip: %v %+v", err, back.GPUsSeen)
	}
	if b, _ := json.Marshal(base); strings.Contains(string(b), "gpus_seen") {
		t.Fatal("a receipt without GPUs seen names the field")
	}

	// A model on its own and a list without a model never encode alike.
	a, b := base, base
	a.GPUModel = "X"
	b.GPUsSeen = []GPUSeen{{UUID: "X", Model: "X"}}
	if bytes.Equal(a.SigningBytes(), b.SigningBytes()) {
		t.Fatal("distinct receipts encode alike")
	}

	// One-sided records carry it too.
	o := oneSided(t, interim("lease-1", "job-1", prov, sub, 0, ""), SignerProvider, prov, sub, OutcomeFailed, AttributionJob)
	o.GPUsSeen = []GPUSeen{{UUID: "GPU-1", Model: "NVIDIA A10"}}
	if err := o.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("GPUs seen added to a signed record: %v", err)
	}
}

func TestGPUsSeenRefused(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	for name, edit := range map[string]func(*Receipt){
		"interim":   func(r *Receipt) { r.Final = false },
		"no uuid":   func(r *Receipt) { r.GPUsSeen[0].UUID = "" },
		"control":   func(r *Receipt) { r.GPUsSeen[0].Model = "A\x0010" },
		"too many":  func(r *Receipt) { r.GPUsSeen = make([]GPUSeen, maxGPUsSeen+1) },
		"long name": func(r *Receipt) { r.GPUsSeen[0].Model = strings.Repeat("x", maxModelLen+1) },
	} {
		r := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
		r.GPUsSeen = []GPUSeen{{UUID: "GPU-1", Model: "A10"}}
		edit(&r)
		if err := r.Validate(); !errors.Is(err, ErrInvalidReceipt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	r := sign(t, final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32)))), prov, sub)
	r.GPUsSeen = []GPUSeen{{UUID: "GPU-1", Model: "A10"}}
	data, _ := json.Marshal(r)
	bad := strings.Replace(string(data), `"uuid"`, `"UUID"`, 1)
	if _, err := DecodeReceipt([]byte(bad)); !errors.Is(err, ErrInvalidReceipt) {
		t.Fatalf("a field in another case accepted: %v", err)
	}
}
