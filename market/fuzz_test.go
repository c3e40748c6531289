package market

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func FuzzDecodeDeclaration(f *testing.F) {
	for _, seed := range []string{
		designExample,
		base,
		billionLaughs,
		`{"name":"j","work":{"command":["a","b"],"env":{"X":"1"}},"request":{"gpus":2,"limit":"1h30m","memory":"1.5GiB"},"output":{"path":"/o"}}`,
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1d}\noutput: {path: /out, checkpoints: {path: /c, every: 1m, resume: auto}}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h, disk: 50GiB}\noutput: {path: /out}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h, disk: 0}\noutput: {path: /out}\n",
		`{"name":"j","work":{"command":["a"]},"request":{"limit":"1h","disk":"16MiB"},"output":{"path":"/o"}}`,
		"name: &a x\nwork: {command: [*a]}\nrequest: {limit: 1h}\noutput: {path: /out}\n",
		"name: \"\\ud800\"\nwork: {command: [\"\\u0000\"]}\n",
		"a: &a [*a]\n",
		"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
		"name: x\n---\nname: y\n",
		"? [a]\n: b\n",
		"<<: {name: x}\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeDeclaration(data)
		if err != nil {
			var de *DeclarationError
			if !errors.As(err, &de) || len(de.Problems) == 0 || !errors.Is(err, ErrInvalidDeclaration) {
				t.Fatalf("rejection without problems: %v", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted but invalid: %v", err)
		}
		c, err := d.Canonical()
		if err != nil {
			t.Fatalf("accepted but no canonical form: %v", err)
		}
		back, err := DecodeDeclaration(c)
		if err != nil {
			t.Fatalf("canonical form %s rejected: %v", c, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Fatalf("canonical round trip changed\n%#v\nto\n%#v", d, back)
		}
		var viaJSON Declaration
		if err := json.Unmarshal(c, &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, d) {
			t.Fatalf("json round trip: %#v, %v", viaJSON, err)
		}
		again, _ := back.Canonical()
		if string(again) != string(c) {
			t.Fatalf("canonical form not stable:\n%s\n%s", c, again)
		}
	})
}
