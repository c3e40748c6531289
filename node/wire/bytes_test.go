package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// The bodies whose Go types name domain types (a release's outcome, a
// step's name) encode to the bytes they always have: what a peer of an
// older build sends and signs must read the same here, and what this build
// sends must read the same there. Each body decodes and encodes again to
// the same bytes, whatever value a peer put in a typed field.
func TestWireBytes(t *testing.T) {
	prov, sub := wiretest.SeededParty(t, 1), wiretest.SeededParty(t, 2)
	release := wiretest.Release(prov.ID, sub.ID)
	release.Outcome, release.Attribution, release.Requeued = "provider-lost", "provider", true
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"release", release, `{"lease":"luqtqeve4dwn4e2y","job":"q3v7kz2mxa4bnc6dpe8f","provider":"12D3KooWK99VoVxNE7XzyBwXEzW7xhK7Gpv85r9F3V3fyKSUKPH5","submitter":"12D3KooWJWoaqZhDaoEFshF7Rh1bpY9ohihFhzcW6d69Lr2NASuq","gpus":["GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c01","GPU-5a1e8c34-7f0b-4b7e-9d0c-2b8f1e6a9c02"],"outcome":"provider-lost","attribution":"provider","held_ms":3600000,"at":1767229200000,"requeued":true}`},
		{"release of an unknown outcome", wire.ReleaseBody{Lease: "l1", Outcome: "succeeded", Attribution: "none"}, `{"lease":"l1","job":"","provider":"","submitter":"","gpus":null,"outcome":"succeeded","attribution":"none","held_ms":0,"at":0}`},
		{"release with no outcome", wire.ReleaseBody{Lease: "l1"}, `{"lease":"l1","job":"","provider":"","submitter":"","gpus":null,"outcome":"","attribution":"","held_ms":0,"at":0}`},
		{"event", wire.EventRequest{Lease: "l1", Job: "j1", Step: "run", At: 5}, `{"lease":"l1","job":"j1","step":"run","at":5}`},
		{"checkpoint event", wire.EventRequest{Lease: "l1", Job: "j1", At: 5, Checkpoint: "bafy", N: 2}, `{"lease":"l1","job":"j1","at":5,"checkpoint":"bafy","n":2}`},
		{"receipt with steps", wire.ReceiptRequest{Receipt: json.RawMessage(`{}`), Steps: []wire.StepAt{{Step: "run", At: 1}, {Step: "output", At: 2}}}, `{"receipt":{},"steps":[{"step":"run","at":1},{"step":"output","at":2}]}`},
		{"output with steps", wire.OutputRequest{Lease: "l1", Job: "j1", Output: "bafy", Steps: []wire.StepAt{{Step: "output", At: 2}}}, `{"lease":"l1","job":"j1","output":"bafy","steps":[{"step":"output","at":2}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("encoded\n %s\nwant\n %s", got, tc.want)
			}
			again := roundTripAs(t, tc.body, got)
			if string(again) != tc.want {
				t.Fatalf("decoded and encoded again\n %s\nwant\n %s", again, tc.want)
			}
		})
	}
}

// roundTripAs decodes b into a value of body's type and encodes it again.
func roundTripAs(t *testing.T, body any, b []byte) []byte {
	t.Helper()
	var v any
	switch body.(type) {
	case wire.ReleaseBody:
		v = new(wire.ReleaseBody)
	case wire.EventRequest:
		v = new(wire.EventRequest)
	case wire.ReceiptRequest:
		v = new(wire.ReceiptRequest)
	case wire.OutputRequest:
		v = new(wire.OutputRequest)
	default:
		t.Fatalf("no decoder for %T", body)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
