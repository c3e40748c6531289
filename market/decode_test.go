package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const designExample = `name: resnet-demo
work:                       # what runs; nothing may be asked of a person mid-run
  command: ["python3", "train.py", "--epochs", "90"]
  env: {SEED: "1"}
data:                       # staged before the run starts; read-only inside the job
  - source: ./dataset       # a local path (imported at submit) or a CID
    mount: /data/dataset
request:                    # compute, and the limit after which the job is stopped
  gpus: 1
  gpu_model: H100           # optional constraint
  gpu_memory: 40GiB         # optional, per GPU
  cpus: 2
  memory: 8GiB
  limit: 8h
output:
  path: /out                # the artifact that comes back
  checkpoints:              # intermediate output, returned if the run stops short
    path: /ckpt
    every: 10m
`

func TestDecodeDesignExample(t *testing.T) {
	d, err := DecodeDeclaration([]byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	want := Declaration{
		Name:    "resnet-demo",
		Work:    Work{Command: []string{"python3", "train.py", "--epochs", "90"}, Env: map[string]string{"SEED": "1"}},
		Data:    []Input{{Source: "./dataset", Mount: "/data/dataset"}},
		Request: Request{GPUs: 1, GPUModel: "H100", GPUMemory: 40 * GiB, CPUs: 2, Memory: 8 * GiB, Limit: 8 * Hour, Disk: DefaultDisk},
		Output:  Output{Path: "/out", Checkpoints: &Checkpoints{Path: "/ckpt", Every: 10 * Minute}},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	c, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	const canon = `{"name":"resnet-demo","work":{"command":["python3","train.py","--epochs","90"],"env":{"SEED":"1"}},` +
		`"data":[{"source":"./dataset","mount":"/data/dataset"}],` +
		`"request":{"gpus":1,"gpu_model":"H100","gpu_memory":"40GiB","cpus":2,"memory":"8GiB","limit":"8h","disk":"10GiB"},` +
		`"output":{"path":"/out","checkpoints":{"path":"/ckpt","every":"10m"}}}`
	if string(c) != canon {
		t.Fatalf("canonical:\n%s\nwant\n%s", c, canon)
	}
	// JSON is YAML: the canonical form decodes to the same declaration.
	back, err := DecodeDeclaration(c)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("decoding the canonical form: %+v, %v", back, err)
	}
}

func TestDecodeDefaults(t *testing.T) {
	d, err := DecodeDeclaration([]byte(`
name: cpu-only
work: {command: [make, test]}
request: {limit: 90s}
output: {path: /out, checkpoints: {path: /ckpt, every: 5m, resume: auto}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Request.GPUs != 0 || d.Request.CPUs != DefaultCPUs || d.Request.Memory != DefaultMemory {
		t.Errorf("request defaults: %+v", d.Request)
	}
	if d.Output.Checkpoints.MaxResumes != DefaultMaxResumes {
		t.Errorf("max_resumes default: %+v", d.Output.Checkpoints)
	}
	if d.Data != nil || d.Work.Env != nil {
		t.Errorf("absent data and env should stay nil: %+v", d)
	}
}

// base is a valid declaration that each rejection case breaks in one place.
const base = `name: t
work:
  command: [run]
  env: {A: "1"}
data:
  - {source: ./in, mount: /data}
request: {gpus: 1, cpus: 1, memory: 1GiB, limit: 1h}
output:
  path: /out
  checkpoints: {path: /ckpt, every: 10m}
`

func TestDecodeRejections(t *testing.T) {
	if _, err := DecodeDeclaration([]byte(base)); err != nil {
		t.Fatalf("base: %v", err)
	}
	if d, err := DecodeDeclaration([]byte(base + "after: [abc]\nafter_any: [def, ghi]\n")); err != nil || len(d.After) != 1 || len(d.AfterAny) != 2 {
		t.Fatalf("after, after_any: %v %v, %v", d.After, d.AfterAny, err)
	}
	if d, err := DecodeDeclaration([]byte(strings.Replace(base, "limit: 1h}", "limit: 1h, retries: 3}", 1))); err != nil || d.Request.Retries != 3 {
		t.Fatalf("retries: 3: %+v, %v", d.Request, err)
	}
	cases := []struct {
		name string
		yaml string
		want []string // "field: message fragment"
	}{
		{"unknown top-level", base + "extra: 1\n", []string{"extra: unknown field"}},
		{"unknown nested", strings.Replace(base, "gpus: 1,", "gpus: 1, gpu: 2,", 1), []string{"request.gpu: unknown field"}},
		{"unknown in data", strings.Replace(base, "mount: /data}", "mount: /data, ro: true}", 1), []string{"data[0].ro: unknown field"}},
		{"unknown in checkpoints", strings.Replace(base, "every: 10m}", "every: 10m, keep: 3}", 1), []string{"output.checkpoints.keep: unknown field"}},
		{"missing work", cut(base, "work:", "data:"), []string{"work: is required"}},
		{"missing request", cut(base, "request:", "output:"), []string{"request: is required"}},
		{"missing output", cut(base, "output:", ""), []string{"output: is required"}},
		{"null work", strings.Replace(cut(base, "work:", "data:"), "name: t\n", "name: t\nwork:\n", 1), []string{"work: is required"}},
		{"missing name", strings.Replace(base, "name: t\n", "", 1), []string{"name: is required"}},
		{"long name", strings.Replace(base, "name: t", "name: "+strings.Repeat("x", 129), 1), []string{"name: must be at most 128"}},
		{"unprintable name", strings.Replace(base, "name: t", `name: "a\tb"`, 1), []string{"name: must be printable"}},
		{"empty command", strings.Replace(base, "command: [run]", "command: []", 1), []string{"work.command: is required"}},
		{"empty program", strings.Replace(base, "command: [run]", `command: ["", x]`, 1), []string{"work.command[0]: must name the program"}},
		{"command not a list", strings.Replace(base, "command: [run]", "command: run", 1), []string{"work.command: must be a list"}},
		{"command item a map", strings.Replace(base, "command: [run]", "command: [run, {a: 1}]", 1), []string{"work.command[1]: must be a string"}},
		{"env bad name", strings.Replace(base, `{A: "1"}`, `{1A: "1", "B C": x}`, 1), []string{"work.env[\"1A\"]: must be a name", "work.env[\"B C\"]: must be a name"}},
		{"env reserved", strings.Replace(base, `{A: "1"}`, `{CUDA_VISIBLE_DEVICES: "0"}`, 1), []string{"work.env.CUDA_VISIBLE_DEVICES: is set by the provider"}},
		{"env value a list", strings.Replace(base, `{A: "1"}`, `{A: [1]}`, 1), []string{"work.env.A: must be a string"}},
		{"gpus negative", strings.Replace(base, "gpus: 1,", "gpus: -1,", 1), []string{"request.gpus: must be between 0 and 64"}},
		{"gpus too many", strings.Replace(base, "gpus: 1,", "gpus: 65,", 1), []string{"request.gpus: must be between 0 and 64"}},
		{"gpus overflow", strings.Replace(base, "gpus: 1,", "gpus: 99999999999999999999,", 1), []string{"request.gpus: must be a whole number"}},
		{"gpus fraction", strings.Replace(base, "gpus: 1,", "gpus: 1.5,", 1), []string{"request.gpus: must be a whole number"}},
		{"gpus string", strings.Replace(base, "gpus: 1,", `gpus: "1",`, 1), []string{"request.gpus: must be a whole number"}},
		{"cpus zero", strings.Replace(base, "cpus: 1,", "cpus: 0,", 1), []string{"request.cpus: must be between 1 and 1024"}},
		{"cpus negative", strings.Replace(base, "cpus: 1,", "cpus: -2,", 1), []string{"request.cpus: must be between 1 and 1024"}},
		{"cpus too many", strings.Replace(base, "cpus: 1,", "cpus: 1025,", 1), []string{"request.cpus: must be between 1 and 1024"}},
		{"memory zero", strings.Replace(base, "memory: 1GiB", "memory: 0", 1), []string{"request.memory: must be a size between"}},
		{"disk zero", strings.Replace(base, "memory: 1GiB", "memory: 1GiB, disk: 0", 1), []string{"request.disk: must be a size between 16MiB and 64TiB"}},
		{"disk small", strings.Replace(base, "memory: 1GiB", "memory: 1GiB, disk: 1MiB", 1), []string{"request.disk: must be a size between 16MiB and 64TiB"}},
		{"disk huge", strings.Replace(base, "memory: 1GiB", "memory: 1GiB, disk: 65TiB", 1), []string{"request.disk: must be a size between"}},
		{"disk bad unit", strings.Replace(base, "memory: 1GiB", "memory: 1GiB, disk: 1Gb", 1), []string{`request.disk: must be a size such as 40GiB or 512MiB: bad size "1Gb": unknown unit`}},
		{"memory huge", strings.Replace(base, "memory: 1GiB", "memory: 65TiB", 1), []string{"request.memory: must be a size between"}},
		{"memory bad unit", strings.Replace(base, "memory: 1GiB", "memory: 1Gb", 1), []string{`request.memory: must be a size such as 40GiB or 512MiB: bad size "1Gb": unknown unit`}},
		{"memory negative", strings.Replace(base, "memory: 1GiB", "memory: -1GiB", 1), []string{"request.memory: must be a size such as 40GiB or 512MiB: bad size \"-1GiB\": must not be negative"}},
		{"memory overflow", strings.Replace(base, "memory: 1GiB", "memory: 99EiB", 1), []string{"request.memory: must be a size such as 40GiB or 512MiB: bad size \"99EiB\": too large"}},
		{"gpu_memory bad", strings.Replace(base, "gpus: 1,", "gpus: 1, gpu_memory: lots,", 1), []string{"request.gpu_memory: must be a size"}},
		{"gpu_model without gpus", strings.Replace(base, "gpus: 1,", "gpus: 0, gpu_model: H100,", 1), []string{"request.gpu_model: needs request.gpus of at least 1"}},
		{"limit missing", strings.Replace(base, ", limit: 1h", "", 1), []string{"request.limit: must be a positive duration such as 8h"}},
		{"limit zero", strings.Replace(base, "limit: 1h", "limit: 0s", 1), []string{"request.limit: must be a positive duration such as 8h"}},
		{"limit too long", strings.Replace(base, "limit: 1h", "limit: 31d", 1), []string{"request.limit: must be a positive duration such as 8h, at most 30d"}},
		{"limit no unit", strings.Replace(base, "limit: 1h", "limit: 8", 1), []string{"request.limit: must be a duration such as 8h or 1h30m: bad duration \"8\": missing unit"}},
		{"limit negative", strings.Replace(base, "limit: 1h", "limit: -1h", 1), []string{"request.limit: must be a duration such as 8h or 1h30m: bad duration \"-1h\": must not be negative"}},
		{"limit overflow", strings.Replace(base, "limit: 1h", "limit: 9999999999999999h", 1), []string{"request.limit: must be a duration such as 8h or 1h30m: bad duration \"9999999999999999h\": too large"}},
		{"limit garbage", strings.Replace(base, "limit: 1h", "limit: soon", 1), []string{"request.limit: must be a duration"}},
		{"limit a map", strings.Replace(base, "limit: 1h", "limit: {h: 1}", 1), []string{"request.limit: must be a duration such as 8h, not a mapping"}},
		{"relative mount", strings.Replace(base, "mount: /data}", "mount: data}", 1), []string{"data[0].mount: must be an absolute path"}},
		{"unclean mount", strings.Replace(base, "mount: /data}", "mount: /data/../etc}", 1), []string{`data[0].mount: must be a clean path: "/etc"`}},
		{"root mount", strings.Replace(base, "mount: /data}", "mount: /}", 1), []string{"data[0].mount: must not be the root folder"}},
		{"proc mount", strings.Replace(base, "mount: /data}", "mount: /proc/x}", 1), []string{"data[0].mount: must be outside /proc"}},
		{"missing mount", strings.Replace(base, ", mount: /data}", "}", 1), []string{"data[0].mount: must be an absolute path"}},
		{"missing source", strings.Replace(base, "source: ./in, ", "", 1), []string{"data[0].source: is required"}},
		{"data not a list", strings.Replace(base, "  - {source: ./in, mount: /data}", "  source: x", 1), []string{"data: must be a list of inputs"}},
		{"mount overlaps output", strings.Replace(base, "mount: /data}", "mount: /out/data}", 1), []string{"output.path: /out overlaps data[0].mount /out/data"}},
		{"two mounts equal", strings.Replace(base, "  - {source: ./in, mount: /data}", "  - {source: ./in, mount: /data}\n  - {source: ./b, mount: /data}", 1), []string{"data[1].mount: /data overlaps data[0].mount /data"}},
		{"checkpoints inside output", strings.Replace(base, "path: /ckpt", "path: /out/ckpt", 1), []string{"output.checkpoints.path: /out/ckpt overlaps output.path /out"}},
		{"relative output", strings.Replace(base, "path: /out", "path: out", 1), []string{"output.path: must be an absolute path"}},
		{"missing output path", strings.Replace(base, "  path: /out\n", "", 1), []string{"output.path: is required"}},
		{"every zero", strings.Replace(base, "every: 10m", "every: 0", 1), []string{"output.checkpoints.every: must be a positive duration"}},
		{"every missing", strings.Replace(base, ", every: 10m", "", 1), []string{"output.checkpoints.every: must be a positive duration"}},
		{"resume bad", strings.Replace(base, "every: 10m}", "every: 10m, resume: always}", 1), []string{"output.checkpoints.resume: must be auto or left out"}},
		{"max_resumes without resume", strings.Replace(base, "every: 10m}", "every: 10m, max_resumes: 2}", 1), []string{"output.checkpoints.max_resumes: needs resume: auto"}},
		{"from not a CID", strings.Replace(base, "every: 10m}", "every: 10m, from: /tmp/ckpt}", 1), []string{"output.checkpoints.from: must be the CID of a checkpoint"}},
		{"max_resumes zero", strings.Replace(base, "every: 10m}", "every: 10m, resume: auto, max_resumes: 0}", 1), []string{"output.checkpoints.max_resumes: must be between 1 and 100"}},
		{"after twice", base + "after: [abc, abc]\n", []string{"after[1]: names abc twice"}},
		{"after not an ID", base + "after_any: [\"a b\"]\n", []string{"after_any[0]: must be a job ID of this node"}},
		{"after not a list", base + "after: abc\n", []string{"after: must be a list of strings"}},
		{"retries negative", strings.Replace(base, "limit: 1h}", "limit: 1h, retries: -1}", 1), []string{"request.retries: must be between 0 and 100"}},
		{"retries too many", strings.Replace(base, "limit: 1h}", "limit: 1h, retries: 101}", 1), []string{"request.retries: must be between 0 and 100"}},
		{"duplicate key", strings.Replace(base, "name: t\n", "name: t\nname: u\n", 1), []string{"name: is given twice"}},
		{"merge key", base + "base: &b {x: 1}\n", []string{"base: unknown field"}},
		{"merge used", strings.Replace(base, "request: {", "request: {<<: {gpus: 2}, ", 1), []string{"request.<<: merge keys (<<) are not supported"}},
		{"not a mapping", "- a\n- b\n", []string{"must be a mapping with name, work"}},
		{"scalar document", "hello\n", []string{"must be a mapping with name, work"}},
		{"empty", "", []string{"is empty"}},
		{"comments only", "# nothing\n", []string{"is empty"}},
		{"syntax", "name: [\n", []string{"is not valid YAML or JSON"}},
		{"two documents", base + "---\nname: u\n", []string{"must be a single YAML document"}},
		{"too big", base + "# " + strings.Repeat("x", MaxDeclarationBytes) + "\n", []string{"a declaration may be at most 65536"}},
		{"json unknown", `{"name":"t","work":{"command":["a"]},"request":{"limit":"1h","gpu":1},"output":{"path":"/out"}}`, []string{"request.gpu: unknown field"}},
		{"json number limit", `{"name":"t","work":{"command":["a"]},"request":{"limit":3600},"output":{"path":"/out"}}`, []string{"request.limit: must be a duration such as 8h or 1h30m: bad duration \"3600\": missing unit"}},
		{"many at once", `
name: ""
work: {command: []}
request: {gpus: -1, cpus: 0, memory: 1Gb, limit: 0}
output: {path: relative}
bogus: 1
`, []string{"name: is required", "work.command: is required", "request.gpus: must be between", "request.cpus: must be between",
			"request.memory: must be a size such as", "request.limit: must be a positive duration", "output.path: must be an absolute path", "bogus: unknown field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeDeclaration([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", d)
			}
			if !errors.Is(err, ErrInvalidDeclaration) {
				t.Fatalf("error %v is not ErrInvalidDeclaration", err)
			}
			var de *DeclarationError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DeclarationError", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(de.Problems) {
				t.Errorf("Error() has %d lines for %d problems", len(lines), len(de.Problems))
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("no problem %q in:\n%v", w, err)
				}
			}
			if len(de.Problems) > len(c.want) {
				t.Errorf("%d problems, want %d:\n%v", len(de.Problems), len(c.want), err)
			}
		})
	}
}

// cut removes the text from the line starting with from up to the line
// starting with to (or the end).
func cut(s, from, to string) string {
	i := strings.Index(s, "\n"+from)
	if i < 0 {
		i = strings.Index(s, from) - 1
	}
	if to == "" {
		return s[:i+1]
	}
	j := strings.Index(s, "\n"+to)
	return s[:i+1] + s[j+1:]
}

func TestProblemCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(base)
	for i := range 500 {
		fmt.Fprintf(&b, "x%d: 1\n", i)
	}
	_, err := DecodeDeclaration([]byte(b.String()))
	var de *DeclarationError
	if !errors.As(err, &de) {
		t.Fatal(err)
	}
	if n := len(de.Problems); n != maxProblems+1 || !strings.Contains(de.Problems[n-1].Message, "400 more problems") {
		t.Fatalf("%d problems, last %v", n, de.Problems[n-1])
	}
}

func TestDecodeAliases(t *testing.T) {
	// A few aliases, as people use them, are fine.
	d, err := DecodeDeclaration([]byte(`
name: &n aliased
work: {command: [*n, --flag], env: &e {A: "1", B: "2"}}
request: {gpus: 1, limit: &l 2h}
output: {path: /out, checkpoints: {path: /ckpt, every: *l}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Work.Command[0] != "aliased" || d.Output.Checkpoints.Every != 2*Hour {
		t.Fatalf("%+v", d)
	}
}

// billionLaughs expands to 10^9 strings if every alias is followed.
const billionLaughs = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
name: bomb
work: {command: *i}
request: {gpus: 1, limit: 1h}
output: {path: /out}
`

func TestDecodeYAMLBomb(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := DecodeDeclaration([]byte(billionLaughs))
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a billion laughs was accepted")
	}
	if !strings.Contains(err.Error(), "work.command: uses YAML aliases that expand to more than 1000 nodes") {
		t.Fatalf("unexpected error: %v", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 256<<10 {
		t.Fatalf("decoding the bomb allocated %d bytes", grown)
	}
	allocs := testing.AllocsPerRun(5, func() { DecodeDeclaration([]byte(billionLaughs)) })
	if allocs > 2000 {
		t.Fatalf("%.0f allocations per decode of the bomb", allocs)
	}
	// The same bomb hidden in an env value or a key is refused too.
	hidden := strings.Replace(billionLaughs, "work: {command: *i}", "work: {command: [x], env: {A: *i}}", 1)
	if _, err := DecodeDeclaration([]byte(hidden)); err == nil || !strings.Contains(err.Error(), "work.env.A:") {
		t.Fatalf("hidden bomb: %v", err)
	}
}

func TestValidate(t *testing.T) {
	d := NewDeclaration("", []string{"/usr/bin/python3", "train.py"}, 2, 8*Hour, []Input{{Source: "./x", Mount: "/data"}})
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Name != "python3" || d.Output.Path != "/out" || d.Request.CPUs != 1 || d.Request.Memory != GiB {
		t.Fatalf("defaults: %+v", d)
	}
	// From gossip nothing is defaulted: an omitted CPU count is an error.
	var gossip Declaration
	if err := json.Unmarshal([]byte(`{"name":"g","work":{"command":["a"]},"request":{"gpus":1,"limit":"1h","memory":"1GiB"},"output":{"path":"/out"}}`), &gossip); err != nil {
		t.Fatal(err)
	}
	err := gossip.Validate()
	if err == nil || !strings.Contains(err.Error(), "request.cpus: must be between 1 and 1024") {
		t.Fatalf("gossip without cpus: %v", err)
	}
	if _, err := gossip.Canonical(); !errors.Is(err, ErrInvalidDeclaration) {
		t.Fatalf("Canonical of an invalid declaration: %v", err)
	}
	bad := NewDeclaration("x", nil, -1, 0, nil)
	err = bad.Validate()
	for _, w := range []string{"work.command: is required", "request.gpus:", "request.limit:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in %v", w, err)
		}
	}
}

func TestCanonicalDeterministic(t *testing.T) {
	env := map[string]string{}
	for i := range 50 {
		env[fmt.Sprintf("V%d", i)] = fmt.Sprint(i)
	}
	d := NewDeclaration("x", []string{"a"}, 1, Hour, nil)
	d.Work.Env = env
	first, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := d.Canonical()
		if string(again) != string(first) {
			t.Fatal("canonical form changed between calls")
		}
	}
}

func TestCheckSources(t *testing.T) {
	d := NewDeclaration("x", []string{"a"}, 1, Hour, []Input{
		{Source: "./present", Mount: "/a"},
		{Source: "./x", Mount: "/b"},
		{Source: "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", Mount: "/c"},
		{Source: "QmPZ9gcCEpqKTo6aq61g2nXGUhM4iCL3ewB6LDXZCtioEB", Mount: "/d"},
	})
	var asked []string
	exists := func(p string) (bool, error) {
		asked = append(asked, p)
		return p == "./present", nil
	}
	err := CheckSources(d, exists)
	if err == nil || err.Error() != `data[1].source: no such file or folder "./x"` {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ErrInvalidDeclaration) {
		t.Fatal("not ErrInvalidDeclaration")
	}
	if !slices.Equal(asked, []string{"./present", "./x"}) {
		t.Fatalf("looked up %v; CIDs must not be looked up", asked)
	}
	boom := errors.New("permission denied")
	err = CheckSources(d, func(string) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || errors.Is(err, ErrInvalidDeclaration) {
		t.Fatalf("I/O error not passed through: %v", err)
	}
}

// TestValidateWorkdir: work.workdir is an absolute clean path outside the
// kernel's file systems; / is allowed; a gossiped declaration with one
// decodes strictly.
func TestValidateWorkdir(t *testing.T) {
	for wd, want := range map[string]string{
		"/code":                         "",
		"/":                             "",
		"/out/logs":                     "",
		"code":                          "work.workdir: must be an absolute path",
		"/code/../etc":                  "work.workdir: must be a clean path",
		"/proc/self":                    "work.workdir: must be outside /proc, /sys and /dev",
		"/dev":                          "work.workdir: must be outside /proc, /sys and /dev",
		"/co\x00de":                     "work.workdir: must not contain NUL",
		"/code/":                        "work.workdir: must be a clean path",
		"/" + strings.Repeat("x", 4096): "work.workdir: must be at most 4096 bytes long",
	} {
		d := NewDeclaration("x", []string{"a"}, 1, Hour, nil)
		d.Work.Workdir = wd
		err := d.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("workdir %q: %v", wd, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("workdir %q: %v, want %q", wd, err, want)
		}
	}
	var gossip Declaration
	if err := json.Unmarshal([]byte(`{"name":"g","work":{"command":["a"],"workdir":"/code"},"request":{"gpus":1,"cpus":1,"limit":"1h","memory":"1GiB"},"output":{"path":"/out"}}`), &gossip); err != nil {
		t.Fatal(err)
	}
	if err := gossip.Validate(); err != nil || gossip.Work.Workdir != "/code" {
		t.Fatalf("gossiped declaration with a workdir: %q, %v", gossip.Work.Workdir, err)
	}
	file, err := DecodeDeclaration([]byte("name: w\nwork: {command: [python3, train.py], workdir: /code}\nrequest: {limit: 1h}\noutput: {path: /out}\n"))
	if err != nil || file.Work.Workdir != "/code" {
		t.Fatalf("a declaration file with a workdir: %q, %v", file.Work.Workdir, err)
	}
	if _, err := DecodeDeclaration([]byte("name: w\nwork: {command: [a], workdir: code}\nrequest: {limit: 1h}\noutput: {path: /out}\n")); err == nil || !strings.Contains(err.Error(), "work.workdir") {
		t.Fatalf("a declaration file with a relative workdir: %v", err)
	}
}
