package market

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
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
		"name: x\nwork: {comand: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\nlabels: {team: v, \"-x\": [1], sweep/lr: \"\\u0001\"}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h, disk: 0}\noutput: {path: /out}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {count: 100, parallel: 10}\n",
		"name: x\nwork: {command: [a], env: {E31_TASK_INDEX: \"1\"}}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {values: [a, b], count: 2, parallel: 3, seed: 1}\n",
		`{"name":"j","work":{"command":["a"]},"request":{"limit":"1h","disk":"16MiB"},"output":{"path":"/o"}}`,
		"name: &a x\nwork: {command: [*a]}\nrequest: {limit: 1h}\noutput: {path: /out}\n",
		"name: \"\\ud800\"\nwork: {command: [\"\\u0000\"]}\n",
		"a: &a [*a]\n",
		"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
		"name: x\n---\nname: y\n",
		"name: d\nwork: {image: bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy, image_size: 5GiB, command: [a]}\n" +
			"data: [{source: bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy, mount: /d, size: 100GiB}]\n" +
			"request: {limit: 1h, locality_wait: 30s}\noutput: {path: /out}\n",
		"name: d\nwork: {command: [a]}\ndata: [{source: /x, mount: /d, size: 1B}]\nrequest: {limit: 1h, locality: off, locality_wait: 1m}\noutput: {path: /out}\n",
		"name: d\nwork: {command: [a], image_size: 2PiB}\nrequest: {limit: 1h, locality: on, locality_wait: -1s}\noutput: {path: /out}\n",
		"name: w\nwork: {command: [python3, train.py], workdir: /code}\ndata: [{source: /x, mount: /code}]\nrequest: {limit: 1h}\noutput: {path: /out}\n",
		"name: w\nwork: {command: [a], workdir: ../proc}\nrequest: {limit: 1h}\noutput: {path: /out}\n",
		"name: g\nwork: {command: [torchrun, t.py]}\nrequest: {gpus: 8, limit: 1h, nodes: 4}\noutput: {path: /out}\n",
		"name: g\nwork: {command: [a], env: {RANK: \"3\", E31_NUM_NODES: x}}\nrequest: {gpus: 0, limit: 1h, nodes: 64}\noutput: {path: /out}\n",
		"name: g\nwork: {command: [a]}\nrequest: {limit: 1h, nodes: 2}\noutput: {path: /out}\narray: {count: 2}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {indices: [7, 40, 73], parallel: 9, max_failures: 2}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {indices: \"0-9,40,73\", values: [a, b], count: 1}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {indices: [3, 1, 1, -2, 100000], max_failures: -1}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\narray: {indices: [], count: 2}\n",
		`{"name":"j","work":{"command":["a"]},"request":{"limit":"1h"},"output":{"path":"/o"},"array":{"indices":[0,5,99999],"values":["a"]}}`,
		"name: g\nwork: {command: [a]}\nrequest: {limit: 1h, nodes: 65}\noutput: {path: /out}\n",
		`{"name":"g","work":{"command":["a"]},"request":{"gpus":1,"limit":"1h","nodes":-1},"output":{"path":"/o"}}`,
		`{"name":"g","work":{"command":["a"]},"request":{"gpus":1,"limit":"1h","nodes":1},"output":{"path":"/o"},"array":{"count":3}}`,
		"name: \"x\\x1b]52;c;cHduZWQ=\\a\"\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\n",
		"name: x\nwork: {command: [a]}\nrequest: {limit: 1h}\noutput: {path: /out}\nlabels: {team: \"v\\u202e\", lr: \"\\u009b\", ok: \"\\u200d\"}\n",
		"name: s\nwork: {command: [a], env: {T: x}}\nrequest: {limit: 1h}\noutput: {path: /out}\nsecrets: [HF_TOKEN, {name: T, from: \"file:./t\"}, {name: C, from: \"env:X\"}]\n",
		`{"name":"s","work":{"command":["a"]},"request":{"limit":"1h"},"output":{"path":"/run/secrets"},"secrets":[{"name":"E31_X"},{"name":"A","from":"vault"},{"name":"A"}]}`,
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
		// Every peer prints these: nothing in them a terminal obeys.
		for k, v := range d.Labels {
			if strings.ContainsFunc(d.Name+k+v, unsafeText) {
				t.Fatalf("accepted name %q, label %q=%q", d.Name, k, v)
			}
		}
		if strings.ContainsFunc(d.Name, unsafeText) {
			t.Fatalf("accepted name %q", d.Name)
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

// FuzzHoldings feeds arbitrary filters and root lists to the checks an
// offer's holdings pass on arrival, and to Match: nothing may panic or
// allocate past the bounds, and whatever passes must hold its roots.
func FuzzHoldings(f *testing.F) {
	h := NewHoldings([]Datum{{Root: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", Size: 1 << 30}})
	f.Add([]byte(nil), "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
	f.Add(bloomOf("a", "b"), "a")
	f.Add(bloomOf("a")[:40], "a")
	f.Add(append(bloomOf("a"), 0), "a")
	f.Add(make([]byte, 24), "x")
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 64, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "y")
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, "z")
	f.Fuzz(func(t *testing.T, filter []byte, root string) {
		h := Holdings{Roots: h.Roots, Bloom: filter}
		err := h.Check()
		if err != nil && !errors.Is(err, ErrBadHoldings) {
			t.Fatalf("error without ErrBadHoldings: %v", err)
		}
		if err == nil && len(filter) > 0 {
			b, _ := decodeBloom(filter)
			if b.Cap() > MaxHoldingsBloomBits {
				t.Fatalf("accepted a filter of %d bits", b.Cap())
			}
		}
		v := View{Now: 1, Offers: []Offer{{Provider: "p", GPUs: []GPU{{UUID: "g", Free: true}}, CPUs: 1, MemoryBytes: 1 << 30, Holdings: h}},
			Jobs: []Job{{ID: "j", Submitter: "s", Request: Request{GPUs: 1, CPUs: 1, Memory: MiB, Limit: Hour}, Data: []Datum{{Root: root, Size: 1}}}}}
		if r := Match(v, Options{}); len(r.Assignments) != 1 {
			t.Fatalf("the only job was not placed on the only offer: %+v", r)
		}
	})
}
