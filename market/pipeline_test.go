package market

import (
	"slices"
	"strings"
	"testing"
)

const pipelineFile = `name: nightly
jobs:
  - name: report
    after_any: [train]
    work: {command: [sh, -c, "cat /in/model"]}
    data: [{source: "job:train/out", mount: /in}]
    request: {gpus: 0, cpus: 1, limit: 10m}
    output: {path: /out}
  - name: prepare
    work: {command: [sh, -c, "echo 21 > /out/n"]}
    request: {gpus: 1, limit: 10m}
    output: {path: /out}
  - name: train
    after: [prepare]
    work: {command: [python3, /code/train.py]}
    data: [{source: "job:prepare/out", mount: /in}]
    request: {gpus: 1, limit: 1h}
    output: {path: /out}
`

func TestDecodePipeline(t *testing.T) {
	if !IsPipeline([]byte(pipelineFile)) || IsPipeline([]byte(base)) {
		t.Fatal("IsPipeline tells a pipeline from a declaration wrongly")
	}
	p, err := DecodePipeline([]byte(pipelineFile))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "nightly" || len(p.Jobs) != 3 || p.Jobs[2].After[0] != "prepare" {
		t.Fatalf("decoded %+v", p)
	}
	order, err := p.Order()
	if err != nil || !slices.Equal(order, []int{1, 2, 0}) {
		t.Fatalf("order %v, %v; want prepare, train, report", order, err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"cycle", "    after: [prepare]\n", "    after: [prepare, report]\n", "jobs: report, train wait for each other in a cycle"},
		{"after itself", "    after: [prepare]\n", "    after: [train]\n", "jobs[2] (train): is after itself"},
		{"a name twice", "  - name: prepare\n", "  - name: train\n", "jobs[2]: name: train is the name of jobs[1] too"},
		{"no name", "  - name: prepare\n", "  - \n", "jobs[1]: name: is required"},
		{"an input not waited for", "    after: [prepare]\n", "", "data[0].source job:prepare/out names job prepare, which is not in its after or after_any"},
		{"a bad job", "request: {gpus: 1, limit: 1h}", "request: {gpus: 1, limit: forever}", "jobs[2] (train): request.limit"},
		{"an unknown field", "name: nightly\n", "name: nightly\nretry: 3\n", "retry: unknown field (want one of name, jobs)"},
		{"no jobs", pipelineFile, "name: x\njobs: []\n", "jobs: must be a list of declarations, at least one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodePipeline([]byte(strings.Replace(pipelineFile, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodePipeline(f *testing.F) {
	f.Add([]byte(pipelineFile))
	f.Add([]byte("jobs: [{name: a, after: [a]}]"))
	f.Add([]byte("jobs: &x [*x]"))
	f.Add([]byte("name: [1]\njobs: {}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePipeline(data)
		if err != nil {
			return
		}
		order, err := p.Order()
		if err != nil || len(order) != len(p.Jobs) {
			t.Fatalf("a decoded pipeline has no order: %v %v", order, err)
		}
	})
}
