package market

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const gangDecl = `name: ddp
work: {command: [torchrun, train.py], env: {A: "1"}}
request: {gpus: 8, gpu_model: H100, cpus: 32, memory: 256GiB, limit: 12h, nodes: 4}
output: {path: /out}
`

func TestDecodeGang(t *testing.T) {
	d, err := DecodeDeclaration([]byte(gangDecl))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Request.Gang() || d.Request.Nodes != 4 || d.Parts() != 4 {
		t.Fatalf("request %+v: Gang %v, Parts %d", d.Request, d.Request.Gang(), d.Parts())
	}
	c, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), `"limit":"12h","disk":"10GiB","nodes":4}`) {
		t.Fatalf("canonical form without its nodes: %s", c)
	}
	back, err := DecodeDeclaration(c)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("decoding the canonical form: %+v, %v", back, err)
	}

	// Part 2 runs the gang's own declaration, request.nodes included, with
	// its rank and the gang's size in its environment.
	part := d.Task(2)
	want := map[string]string{"A": "1", EnvNodeRank: "2", EnvRank: "2", EnvNumNodes: "4", EnvWorldSize: "4"}
	if !reflect.DeepEqual(part.Work.Env, want) {
		t.Fatalf("part env %v, want %v", part.Work.Env, want)
	}
	if part.Request != d.Request || part.Array != nil {
		t.Fatalf("part request %+v, array %v", part.Request, part.Array)
	}
	if _, ok := d.Work.Env[EnvNodeRank]; ok {
		t.Fatal("Task changed the gang's own environment")
	}
	if err := part.Validate(); err != nil {
		t.Fatalf("a part's declaration: %v", err)
	}
	// A rank the declaration sets itself is the part's own in the end.
	d.Work.Env[EnvRank] = "7"
	if got := d.Task(1).Work.Env[EnvRank]; got != "1" {
		t.Fatalf("RANK %q, want 1", got)
	}
}

func TestDeclarationParts(t *testing.T) {
	for _, tc := range []struct {
		d    Declaration
		want int
	}{
		{Declaration{}, 1},
		{Declaration{Request: Request{Nodes: 1}}, 1},
		{Declaration{Request: Request{Nodes: 3}}, 3},
		{Declaration{Array: &Array{Count: 5}}, 5},
		{Declaration{Array: &Array{Values: []string{"a", "b"}}, Request: Request{Nodes: 1}}, 2},
	} {
		if got := tc.d.Parts(); got != tc.want {
			t.Errorf("Parts of %+v = %d, want %d", tc.d, got, tc.want)
		}
	}
	if (Request{Nodes: 1}).Gang() || (Request{}).Gang() || !(Request{Nodes: 2}).Gang() {
		t.Error("Gang: 0 and 1 are one node, 2 a gang")
	}
}

func TestGangRejections(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"nodes: 4", "nodes: -1", "request.nodes: must be between 1 and 64 providers at once (0 means 1)"},
		{"nodes: 4", "nodes: 65", "request.nodes: must be between 1 and 64"},
		{"nodes: 4", "nodes: two", "request.nodes: must be a whole number"},
		{"nodes: 4", "nodes: 1.5", "request.nodes: must be a whole number"},
		{"nodes: 4", "node: 4", "request.node: unknown field (want one of gpus, gpu_model, gpu_memory, cpus, memory, disk, limit, locality, locality_wait, retries, nodes, max_price)"},
		{"output: {path: /out}\n", "output: {path: /out}\narray: {count: 3}\n", "request.nodes: cannot be set with array: an array of gangs is not supported, submit the gangs one by one"},
		{"gpus: 8,", "gpus: -1,", "request.gpus: must be between 0 and 64"},
	} {
		doc := strings.Replace(gangDecl, tc.from, tc.to, 1)
		_, err := DecodeDeclaration([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.to, err, tc.want)
		}
	}
	// One node, and an array of single-node tasks, are as before.
	for _, ok := range []string{"nodes: 1", "nodes: 0"} {
		doc := strings.Replace(gangDecl, "nodes: 4", ok, 1) + "array: {count: 3}\n"
		if _, err := DecodeDeclaration([]byte(doc)); err != nil {
			t.Errorf("%s with an array: %v", ok, err)
		}
	}
	// A CPU-only gang is a gang.
	doc := strings.Replace(gangDecl, "gpus: 8, gpu_model: H100,", "gpus: 0,", 1)
	if d, err := DecodeDeclaration([]byte(doc)); err != nil || d.Parts() != 4 {
		t.Errorf("CPU-only gang: %v", err)
	}
}

// TestCanonicalWithoutNodes: a declaration that says nothing of nodes,
// or says 0, signs the same bytes as before the field existed; 1 is a
// value the submitter chose and is signed as such.
func TestCanonicalWithoutNodes(t *testing.T) {
	d, err := DecodeDeclaration([]byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.Canonical()
	if strings.Contains(string(before), "nodes") {
		t.Fatalf("canonical form names nodes: %s", before)
	}
	d.Request.Nodes = 1
	one, _ := d.Canonical()
	if !strings.Contains(string(one), `"nodes":1`) {
		t.Fatalf("nodes: 1 left out: %s", one)
	}
	var r Request
	if err := json.Unmarshal([]byte(`{"gpus":1,"cpus":1,"memory":"1GiB","limit":"1h"}`), &r); err != nil || r.Nodes != 0 {
		t.Fatalf("an old request decodes with nodes %d, %v", r.Nodes, err)
	}
}

// TestViewHashNodes: a job's node count is part of the view. That a view
// without any hashes as before is TestMatchGolden's to hold, since its
// digests cover each result's view hash.
func TestViewHashNodes(t *testing.T) {
	v := View{Now: scenarioStart, Jobs: []Job{{ID: "g.0", Submitter: "s", Request: Request{GPUs: 1, CPUs: 1, Memory: GiB, Limit: Hour}}}}
	seen := map[string]int{}
	for _, n := range []int{0, 1, 2, 3} {
		v.Jobs[0].Request.Nodes = n
		h := v.Hash()
		if prev, ok := seen[h]; ok {
			t.Errorf("nodes %d hashes as nodes %d", n, prev)
		}
		seen[h] = n
	}
}
