package ledger

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The relay a lease's data moved through is signed by both sides, survives
// JSON, never encodes like a receipt without one, and is refused where it
// makes no sense.
func TestRelaySignedAndKept(t *testing.T) {
	prov, sub, relay := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
	plain := base.SigningBytes()

	r := base
	r.Relay = relay.id
	r = sign(t, r, prov, sub)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.SigningBytes(), plain) || len(r.SigningBytes()) == len(plain) {
		t.Fatal("the relay is not a tail after the old encoding")
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"relay":"`+relay.id.String()+`"`) {
		t.Fatalf("json: %s", data)
	}
	back, err := DecodeReceipt(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil || back.Relay != relay.id {
		t.Fatalf("round trip: %v, relay %q", err, back.Relay)
	}
	if b, _ := json.Marshal(base); strings.Contains(string(b), `"relay"`) {
		t.Fatal("a receipt without a relay names the field")
	}

	// With GPUs seen or a model, with or without the relay: never alike.
	a, b := base, base
	a.GPUModel, a.GPUsSeen = "X", []GPUSeen{{UUID: "U", Model: "M"}}
	b.GPUModel, b.GPUsSeen, b.Relay = "X", []GPUSeen{{UUID: "U", Model: "M"}}, relay.id
	c := base
	c.GPUModel = "X"
	for _, pair := range [][2]Receipt{{a, b}, {c, b}, {base, b}} {
		if bytes.Equal(pair[0].SigningBytes(), pair[1].SigningBytes()) {
			t.Fatal("distinct receipts encode alike")
		}
	}

	for name, bad := range map[string]func(*Receipt){
		"interim":    func(r *Receipt) { r.Final = false; r.Outcome, r.Attribution = "", ""; r.ExitCode, r.Reason = nil, "" },
		"the party":  func(r *Receipt) { r.Relay = r.Provider },
		"not a peer": func(r *Receipt) { r.Relay = "nope" },
	} {
		x := r
		bad(&x)
		if err := x.Validate(); err == nil {
			t.Errorf("%s: a relay accepted", name)
		}
	}
	raw := strings.Replace(string(data), relay.id.String(), "12D3KooWnotapeer", 1)
	if _, err := DecodeReceipt([]byte(raw)); !errors.Is(err, ErrInvalidReceipt) {
		t.Fatalf("a relay that is no peer ID decoded: %v", err)
	}
}
