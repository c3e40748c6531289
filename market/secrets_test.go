package market

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestSecretsDecode(t *testing.T) {
	const head = "name: x\nwork: {command: [true], env: {SEED: \"1\"}}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\n"
	d, err := DecodeDeclaration([]byte(head + "secrets: [{name: HF_TOKEN}, {name: WANDB_API_KEY, from: \"env:WB\"}, {name: CREDS, from: \"file:./creds.json\"}, S3_KEY]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Secret{{Name: "HF_TOKEN"}, {Name: "WANDB_API_KEY", From: "env:WB"}, {Name: "CREDS", From: "file:./creds.json"}, {Name: "S3_KEY"}}
	if !reflect.DeepEqual(d.Secrets, want) {
		t.Fatalf("secrets %+v, want %+v", d.Secrets, want)
	}
	for i, w := range [][2]string{{"env", "HF_TOKEN"}, {"env", "WB"}, {"file", "./creds.json"}, {"env", "S3_KEY"}} {
		if k, a := d.Secrets[i].Source(); k != w[0] || a != w[1] {
			t.Errorf("secrets[%d].Source() = %s %s, want %s %s", i, k, a, w[0], w[1])
		}
	}

	// The form a submitter signs: names only, from taken out.
	for i := range d.Secrets {
		d.Secrets[i].From = ""
	}
	c, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(c, []byte(`"secrets":[{"name":"HF_TOKEN"},{"name":"WANDB_API_KEY"},{"name":"CREDS"},{"name":"S3_KEY"}]`)) || bytes.Contains(c, []byte("from")) {
		t.Fatalf("canonical form %s", c)
	}
	back, err := DecodeDeclaration(c)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("canonical round trip: %v\n%+v\n%+v", err, back, d)
	}

	many := make([]string, MaxSecrets+1)
	for i := range many {
		many[i] = fmt.Sprintf("S%d", i)
	}
	for _, c := range []struct{ in, want string }{
		{"secrets: [{name: HF_TOKEN}, {name: HF_TOKEN}]", "secrets[1].name: names HF_TOKEN twice"},
		{"secrets: [{name: SEED}]", "secrets[0].name: SEED is in work.env too"},
		{"secrets: [{name: 1TOKEN}]", "secrets[0].name: must be a variable name"},
		{"secrets: [{name: \"A-B\"}]", "secrets[0].name: must be a variable name"},
		{"secrets: [{from: env}]", "secrets[0].name: is required"},
		{"secrets: [{name: E31_TASK_INDEX}]", "secrets[0].name: E31_TASK_INDEX is set by the provider"},
		{"secrets: [{name: CUDA_VISIBLE_DEVICES}]", "is set by the provider"},
		{"secrets: [{name: MASTER_ADDR}]", "is set by the provider"},
		{"secrets: [{name: T, from: vault}]", "secrets[0].from: must be env, env:NAME or file:PATH"},
		{"secrets: [{name: T, from: \"file:\"}]", "secrets[0].from: must be env"},
		{"secrets: [{name: T, from: \"env:1X\"}]", "secrets[0].from: must be env, env:NAME or file:PATH: \"1X\""},
		{"secrets: [{name: T, value: abc}]", "secrets[0].value: unknown field (want one of name, from)"},
		{"secrets: {name: T}", "secrets: must be a list of secrets"},
		{"secrets: [" + strings.Join(many, ", ") + "]", fmt.Sprintf("secrets: must list at most %d secrets", MaxSecrets)},
		{"data: [{source: /x, mount: /run/secrets/T}]\nsecrets: [T]", "data[0].mount: /run/secrets/T overlaps /run/secrets"},
		{"data: [{source: /x, mount: /run}]\nsecrets: [T]", "data[0].mount: /run overlaps /run/secrets"},
	} {
		if _, err := DecodeDeclaration([]byte(head + c.in + "\n")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n%v\nwant %q", c.in, err, c.want)
		}
	}
	// Under work, it says where secrets go.
	_, err = DecodeDeclaration([]byte("name: x\nwork: {command: [true], secrets: [T]}\nrequest: {limit: 1h}\noutput: {path: /out}\n"))
	if err == nil || !strings.Contains(err.Error(), "work.secrets: goes at the top level") {
		t.Errorf("work.secrets: %v", err)
	}
	// Without secrets, /run/secrets is a folder like any other (an input
	// staged there by hand, as jobs did before secrets).
	if _, err := DecodeDeclaration([]byte(head + "data: [{source: /x, mount: /run/secrets/t}]\n")); err != nil {
		t.Errorf("an input at /run/secrets without secrets: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	for _, c := range []struct {
		flag string
		want Secret
		err  string
	}{
		{"HF_TOKEN", Secret{Name: "HF_TOKEN"}, ""},
		{"HF_TOKEN=env", Secret{Name: "HF_TOKEN", From: "env"}, ""},
		{"HF_TOKEN=env:OTHER", Secret{Name: "HF_TOKEN", From: "env:OTHER"}, ""},
		{"CREDS=file:./creds.json", Secret{Name: "CREDS", From: "file:./creds.json"}, ""},
		{"CREDS=file:/a=b", Secret{Name: "CREDS", From: "file:/a=b"}, ""},
		{"", Secret{}, "is required"},
		{"=env", Secret{}, "is required"},
		{"A.B", Secret{}, "must be a variable name"},
		{"E31_X", Secret{}, "set by the provider"},
		{"T=./creds.json", Secret{}, "must be env, env:NAME or file:PATH"},
		{"T=env:", Secret{}, "must be env, env:NAME or file:PATH"},
	} {
		got, err := ParseSecret(c.flag)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseSecret(%q) = %+v, %v; want %+v", c.flag, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseSecret(%q): %v, want %q", c.flag, err, c.err)
		}
	}
}

func TestCheckSecretValues(t *testing.T) {
	secrets := []Secret{{Name: "A"}, {Name: "B"}}
	big := bytes.Repeat([]byte("x"), MaxSecretBytes)
	for _, c := range []struct {
		name   string
		values map[string][]byte
		want   string
	}{
		{"all", map[string][]byte{"A": []byte("a"), "B": {}}, ""},
		{"missing", map[string][]byte{"A": []byte("a")}, "secrets[1]: no value was given for B"},
		{"extra", map[string][]byte{"A": nil, "B": nil, "C": []byte("c")}, "a value was given for C"},
		{"large", map[string][]byte{"A": append(big, 'x'), "B": nil}, "the value of A is 65537 bytes"},
		{"at the bound", map[string][]byte{"A": big, "B": big}, ""},
	} {
		err := CheckSecretValues(secrets, c.values)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: the error holds a value: %v", c.name, err)
		}
	}
	many := make([]Secret, MaxSecretsBytes/MaxSecretBytes+1)
	values := map[string][]byte{}
	for i := range many {
		many[i].Name = fmt.Sprintf("S%d", i)
		values[many[i].Name] = big
	}
	if err := CheckSecretValues(many, values); err == nil || !strings.Contains(err.Error(), "together") {
		t.Errorf("over the total: %v", err)
	}
}
