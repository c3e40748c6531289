package ledger

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/e31network/e31/p2p/peertext"
)

// validJSON returns a signed final receipt as a JSON object that tests can
// edit field by field.
func validJSON(t testing.TB) map[string]any {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := sign(t, final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32)))), prov, sub)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReceiptJSONFields(t *testing.T) {
	m := validJSON(t)
	for _, f := range strings.Fields(`lease job provider submitter gpus seq final held_from held_until
		phase prev outcome attribution exit_code reason phases output checkpoint output_wait
		provider_sig submitter_sig`) {
		if _, ok := m[f]; !ok {
			t.Errorf("receipt JSON lacks %q", f)
		}
	}
	if len(m) != 21 {
		t.Errorf("receipt JSON has %d fields, want 21", len(m))
	}
	if got := m["held_from"]; got != "2026-11-29T14:00:00.000Z" {
		t.Errorf("held_from = %v, want RFC 3339 UTC with milliseconds", got)
	}
	if ph, ok := m["phases"].(map[string]any); !ok || len(ph) != 3 || ph["run"] == nil {
		t.Errorf("phases = %v, want {staging, run, output}", m["phases"])
	}
}

func TestDecodeReceiptRefuses(t *testing.T) {
	edit := func(f func(m map[string]any)) []byte {
		m := validJSON(t)
		f(m)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	good := edit(func(map[string]any) {})
	if _, err := DecodeReceipt(good); err != nil {
		t.Fatalf("valid receipt refused: %v", err)
	}
	cases := map[string][]byte{
		"empty":             nil,
		"not an object":     []byte(`[1,2]`),
		"null":              []byte(`null`),
		"trailing data":     append(bytes.Clone(good), []byte(` {}`)...),
		"too large":         append(bytes.Clone(good), bytes.Repeat([]byte(" "), MaxReceiptSize)...),
		"key in upper case": bytes.Replace(good, []byte(`"lease":`), []byte(`"Lease":`), 1),
		"duplicate key":     bytes.Replace(good, []byte(`{`), []byte(`{"job":"job-2",`), 1),
		"unknown field":     edit(func(m map[string]any) { m["tip"] = 5 }),
		"unknown in phases": edit(func(m map[string]any) { m["phases"].(map[string]any)["idle"] = 1 }),
		"until before from": edit(func(m map[string]any) { m["held_until"] = "2026-11-29T13:59:59.999Z" }),
		"sub-millisecond":   edit(func(m map[string]any) { m["held_from"] = "2026-11-29T14:00:00.0001Z" }),
		"not RFC 3339":      edit(func(m map[string]any) { m["held_from"] = "29 Nov 2026" }),
		"missing time":      edit(func(m map[string]any) { delete(m, "held_until") }),
		"bad provider":      edit(func(m map[string]any) { m["provider"] = "12D3KooWnotapeer" }),
		"missing submitter": edit(func(m map[string]any) { delete(m, "submitter") }),
		"empty lease":       edit(func(m map[string]any) { m["lease"] = "" }),
		"space in job":      edit(func(m map[string]any) { m["job"] = "job 1" }),
		"control in lease":  edit(func(m map[string]any) { m["lease"] = "l\x00" }),
		"negative gpus":     edit(func(m map[string]any) { m["gpus"] = -1 }),
		"bad phase":         edit(func(m map[string]any) { m["phase"] = "idle" }),
		"bad outcome":       edit(func(m map[string]any) { m["outcome"] = "great" }),
		"bad attribution":   edit(func(m map[string]any) { m["attribution"] = "moon" }),
		"negative phase":    edit(func(m map[string]any) { m["phases"].(map[string]any)["run"] = -1 }),
		"phases too long":   edit(func(m map[string]any) { m["phases"].(map[string]any)["run"] = 1e6 }),
		"output wait long":  edit(func(m map[string]any) { m["output_wait"] = 1e9 }),
		"exit code float":   edit(func(m map[string]any) { m["exit_code"] = 1.5 }),
		"exit code huge":    edit(func(m map[string]any) { m["exit_code"] = 1 << 40 }),
		"bad CID":           edit(func(m map[string]any) { m["output"] = "not a cid" }),
		"prev on seq 0":     edit(func(m map[string]any) { m["seq"] = 0 }),
		"no prev on seq 1":  edit(func(m map[string]any) { m["prev"] = "" }),
		"prev not hex":      edit(func(m map[string]any) { m["prev"] = strings.Repeat("G", 64) }),
		"prev upper hex":    edit(func(m map[string]any) { m["prev"] = strings.Repeat("A", 64) }),
		"sig not base64":    edit(func(m map[string]any) { m["provider_sig"] = "!!" }),
		"sig too long":      edit(func(m map[string]any) { m["provider_sig"] = bytes.Repeat([]byte{1}, 200) }),
		"final without outcome": edit(func(m map[string]any) {
			m["outcome"] = ""
		}),
		"outcome on interim": edit(func(m map[string]any) {
			m["final"] = false
		}),
		"output on interim": edit(func(m map[string]any) {
			for _, f := range []string{"outcome", "attribution", "reason"} {
				m[f] = ""
			}
			m["final"], m["exit_code"], m["output_wait"] = false, nil, 0
			m["phases"] = map[string]any{"staging": 0, "run": 0, "output": 0}
		}),
		"interim without phase": edit(func(m map[string]any) {
			for _, f := range []string{"outcome", "attribution", "reason", "output", "phase"} {
				m[f] = ""
			}
			m["final"], m["exit_code"], m["output_wait"] = false, nil, 0
			m["phases"] = map[string]any{"staging": 0, "run": 0, "output": 0}
		}),
	}
	for name, data := range cases {
		if _, err := DecodeReceipt(data); !errors.Is(err, ErrInvalidReceipt) {
			t.Errorf("%s: %v, want ErrInvalidReceipt", name, err)
		}
	}
}

// FuzzDecodeReceipt checks that whatever DecodeReceipt accepts is valid and
// survives a JSON round trip with its signing bytes and signatures intact,
// and that no input makes decoding or verifying panic.
func FuzzDecodeReceipt(f *testing.F) {
	prov, sub := newParty(f, 1), newParty(f, 2)
	for _, r := range []Receipt{
		interim("lease-1", "job-1", prov, sub, 0, ""),
		final(interim("lease-1", "job-1", prov, sub, 2, hex.EncodeToString(make([]byte, 32)))),
	} {
		data, err := json.Marshal(sign(f, r, prov, sub))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	withModel := final(interim("lease-1", "job-1", prov, sub, 2, hex.EncodeToString(make([]byte, 32))))
	withModel.GPUModel = "NVIDIA H100 80GB HBM3"
	withSeen := withModel
	withSeen.GPUsSeen = []GPUSeen{{UUID: "GPU-6a3f0c1e-0000-4000-8000-000000000001", Model: "NVIDIA A10"}}
	seenNoModel := withSeen
	seenNoModel.GPUModel = ""
	relayed := seenNoModel
	relayed.Relay = newParty(f, 3).id
	cpuOnly := final(interim("lease-1", "job-1", prov, sub, 2, hex.EncodeToString(make([]byte, 32))))
	cpuOnly.GPUs, cpuOnly.CPUs, cpuOnly.MemoryBytes, cpuOnly.DiskBytes = 0, 8, 32<<30, 10<<30
	heldInterim := interim("lease-1", "job-1", prov, sub, 0, "")
	heldInterim.CPUs = 2
	heldOneSided := interim("lease-1", "job-1", prov, sub, 0, "")
	heldOneSided.MemoryBytes = 1 << 30
	for _, r := range []Receipt{
		sign(f, relayed, prov, sub),
		sign(f, cpuOnly, prov, sub),
		sign(f, heldInterim, prov, sub),
		oneSided(f, heldOneSided, SignerProvider, prov, sub, OutcomeFailed, AttributionJob),
		sign(f, withModel, prov, sub),
		sign(f, withSeen, prov, sub),
		sign(f, seenNoModel, prov, sub),
		oneSided(f, interim("lease-1", "job-1", prov, sub, 0, ""), SignerSubmitter, prov, sub, OutcomeProviderLost, AttributionProvider),
	} {
		data, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReceipt(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidReceipt) {
				t.Fatalf("error does not wrap ErrInvalidReceipt: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded receipt fails Validate: %v", err)
		}
		for _, s := range []string{r.Reason, r.GPUModel} {
			if strings.ContainsFunc(s, peertext.Unsafe) {
				t.Fatalf("accepted a receipt whose text holds a control or bidi character: %q", s)
			}
		}
		verr := r.Verify()
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeReceipt(again)
		if err != nil {
			t.Fatalf("re-encoded receipt refused: %v\n%s", err, again)
		}
		if !bytes.Equal(back.SigningBytes(), r.SigningBytes()) ||
			!bytes.Equal(back.ProviderSig, r.ProviderSig) || !bytes.Equal(back.SubmitterSig, r.SubmitterSig) {
			t.Fatalf("round trip changed the receipt:\n%s\n%s", data, again)
		}
		if (verr == nil) != (back.Verify() == nil) {
			t.Fatal("round trip changed the outcome of Verify")
		}
	})
}
