package ledger

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A receipt from a peer whose free text a terminal would obey (an OSC 52
// sequence in its reason writes the clipboard of whoever lists it) is
// refused by DecodeReceipt, naming the field and the character: both
// parties signed the text, so it cannot be cleaned. The same receipt
// already in a ledger, stored before the rule, still reads and verifies.
func TestDecodeReceiptRefusesControlText(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	first := sign(t, interim("lease-1", "job-1", prov, sub, 0, ""), prov, sub)
	for _, c := range []struct {
		name string
		edit func(r *Receipt)
		want string
	}{
		{"osc 52 in reason", func(r *Receipt) { r.Reason = "exit status 1: /out/\x1b]52;c;cHduZWQ=\a" }, `reason: control character \x1b at byte 20`},
		{"newline in reason", func(r *Receipt) { r.Reason = "exit status 1\nTraceback" }, `reason: control character \n at byte 13`},
		{"c1 in reason", func(r *Receipt) { r.Reason = "oom\u009b2J" }, `reason: control character \u009b at byte 3`},
		{"bidi in reason", func(r *Receipt) { r.Reason = "limit \u202eh8 reached" }, `reason: bidi control \u202e at byte 6`},
		{"bidi in gpu_model", func(r *Receipt) { r.GPUModel = "NVIDIA \u2066H100" }, `gpu_model: bidi control \u2066 at byte 7`},
		{"bidi in a seen uuid", func(r *Receipt) { r.GPUsSeen = []GPUSeen{{UUID: "GPU-\u202ea", Model: "A10"}} }, `gpus_seen[0].uuid: bidi control \u202e at byte 4`},
		{"bidi in a seen model", func(r *Receipt) { r.GPUsSeen = []GPUSeen{{UUID: "GPU-a", Model: "A10\u200f"}} }, `gpus_seen[0].model: bidi control \u200f at byte 3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := final(interim("lease-1", "job-1", prov, sub, 1, first.Digest()))
			c.edit(&r)
			r = sign(t, r, prov, sub)
			data, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeReceipt(data)
			if !errors.Is(err, ErrInvalidReceipt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeReceipt = %v, want ErrInvalidReceipt saying %q", err, c.want)
			}

			// As a node holds it: read back through the API's JSON, kept in
			// a ledger, verified.
			var held Receipt
			if err := json.Unmarshal(data, &held); err != nil {
				t.Fatalf("a stored receipt with such text no longer reads: %v", err)
			}
			if err := held.Verify(); err != nil {
				t.Fatal(err)
			}
			l := openMem(t, Options{Self: prov.id})
			mustAppend(t, l, first, r)
			if rep := mustVerify(t, l); !rep.OK || rep.Entries != 2 {
				t.Fatalf("a ledger holding such a receipt fails verification: %+v", rep)
			}
		})
	}

	// Text with nothing a terminal obeys is as welcome as before.
	r := final(interim("lease-1", "job-1", prov, sub, 1, first.Digest()))
	r.Reason, r.GPUModel = `failed: /out/naïve "file" \x1b, 😀 עברית`, "NVIDIA H100 80GB HBM3"
	data, err := json.Marshal(sign(t, r, prov, sub))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeReceipt(data); err != nil {
		t.Fatalf("a printable reason refused: %v", err)
	}
}
