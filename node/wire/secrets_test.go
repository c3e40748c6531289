package wire_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// A broadcast declaration names its secrets and nothing of where their
// values come from: a path on the submitter's machine is its own business.
func TestWireDeclarationSecrets(t *testing.T) {
	sub := wiretest.FreshParty(t)
	named := wiretest.Declaration(t, wiretest.CID(t, "shard-0"))
	named.Declaration.Secrets = []market.Secret{{Name: "HF_TOKEN"}}
	if err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, named)); err != nil {
		t.Fatalf("declaration naming a secret rejected: %v", err)
	}
	from := wiretest.Declaration(t, wiretest.CID(t, "shard-0"))
	from.Declaration.Secrets = []market.Secret{{Name: "HF_TOKEN", From: "file:/home/alice/.hf"}}
	if err := from.Declaration.Validate(); err != nil {
		t.Fatalf("the declaration itself should be valid: %v", err)
	}
	err := wire.ValidateJobMessage(wiretest.OnWire(t, sub, wire.KindDeclaration, from))
	if err == nil || !strings.Contains(err.Error(), "secrets[0].from") {
		t.Fatalf("declaration with a secret's from on the wire: %v", err)
	}
}

func TestProposeReplySecrets(t *testing.T) {
	rep := wire.ProposeReply{SubmitterSig: []byte("sig"), Secrets: wire.SecretValues{"HF_TOKEN": []byte("hf_x\x00y")}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back wire.ProposeReply
	if err := p2p.DecodeStrict(b, &back); err != nil || !bytes.Equal(back.Secrets["HF_TOKEN"], []byte("hf_x\x00y")) {
		t.Fatalf("round trip: %v, %q", err, back.Secrets)
	}
	// A reply without secrets is what it always was.
	b, _ = json.Marshal(wire.ProposeReply{SubmitterSig: []byte("sig")})
	if bytes.Contains(b, []byte("secrets")) {
		t.Fatalf("reply without secrets: %s", b)
	}

	declared := []market.Secret{{Name: "HF_TOKEN"}, {Name: "WB"}}
	if err := (wire.SecretValues{"HF_TOKEN": nil, "WB": []byte("w")}).Match(declared); err != nil {
		t.Errorf("matching values: %v", err)
	}
	if err := (wire.SecretValues{"HF_TOKEN": nil}).Match(declared); err == nil {
		t.Error("a declared secret missing: matched")
	}
	if err := (wire.SecretValues{"HF_TOKEN": nil, "WB": nil, "X": nil}).Match(declared); err == nil {
		t.Error("a secret not declared: matched")
	}

	big := bytes.Repeat([]byte{'a'}, market.MaxSecretBytes+1)
	many := wire.SecretValues{}
	for i := range market.MaxSecrets + 1 {
		many[fmt.Sprintf("S%d", i)] = nil
	}
	heavy := wire.SecretValues{}
	for i := range market.MaxSecretsBytes/market.MaxSecretBytes + 1 {
		heavy[fmt.Sprintf("S%d", i)] = big[:market.MaxSecretBytes]
	}
	for name, v := range map[string]wire.SecretValues{
		"too large":       {"T": big},
		"too many":        many,
		"too much":        heavy,
		"not a name":      {"A-B": nil},
		"a provider name": {"E31_OUTPUT": nil},
	} {
		b, err := json.Marshal(wire.ProposeReply{Secrets: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := p2p.DecodeStrict(b, &back); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzProposeReply feeds the reply's decoder what a hostile submitter
// could send: whatever it accepts is within a job's bounds, and nothing
// panics.
func FuzzProposeReply(f *testing.F) {
	f.Add([]byte(`{"submitter_sig":"c2ln"}`))
	f.Add([]byte(`{"submitter_sig":"c2ln","secrets":{"HF_TOKEN":"aGZfeHl6"}}`))
	f.Add([]byte(`{"submitter_sig":"c2ln","secrets":{"HF_TOKEN":"aGZfeHl6","HF_TOKEN":"eA=="}}`))
	f.Add([]byte(`{"secrets":{"E31_X":""}}`))
	f.Add([]byte(`{"secrets":{"":"","1":null}}`))
	f.Add([]byte(`{"secrets":[]}`))
	f.Add([]byte(`{"secrets":{"A":"!!!"}}`))
	f.Add([]byte(`{"secrets":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var rep wire.ProposeReply
		if p2p.DecodeStrict(b, &rep) != nil {
			return
		}
		if len(rep.Secrets) > market.MaxSecrets {
			t.Fatalf("accepted %d secrets", len(rep.Secrets))
		}
		total := 0
		for name, v := range rep.Secrets {
			if !market.ValidSecretName(name) || len(v) > market.MaxSecretBytes {
				t.Fatalf("accepted secret %q of %d bytes", name, len(v))
			}
			total += len(v)
		}
		if total > market.MaxSecretsBytes {
			t.Fatalf("accepted %d bytes of secrets", total)
		}
		_ = rep.Secrets.Match([]market.Secret{{Name: "HF_TOKEN"}})
	})
}
