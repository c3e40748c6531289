package market

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Pipeline is a file of jobs that wait for each other: each job is a
// declaration whose after, after_any and job:NAME/out sources may name
// the other jobs of the file by name. Its submitter submits the jobs in
// Order, each with the IDs of those submitted before it in place of
// their names.
type Pipeline struct {
	Name string
	Jobs []Declaration
}

const (
	// MaxPipelineJobs bounds a pipeline file's jobs.
	MaxPipelineJobs = 1000
	// MaxPipelineBytes bounds a pipeline file.
	MaxPipelineBytes = 4 << 20
)

// IsPipeline reports whether a file's YAML is a pipeline (a mapping with
// jobs) rather than one declaration. It says nothing of its validity.
func IsPipeline(data []byte) bool {
	var top struct {
		Jobs yaml.Node `yaml:"jobs"`
	}
	return yaml.Unmarshal(data, &top) == nil && top.Jobs.Kind != 0
}

// DecodePipeline reads a pipeline file: name (optional) and jobs, a list
// of declarations, each checked as DecodeDeclaration checks one, and then
// the graph: every job named, each name once, no job after itself or in a
// cycle, and every job:NAME source of a job of the file listed in the
// reader's after or after_any, since it is resolved when NAME completes.
func DecodePipeline(data []byte) (Pipeline, error) {
	if len(data) > MaxPipelineBytes {
		return Pipeline{}, fmt.Errorf("is %d bytes; a pipeline file may be at most %d", len(data), MaxPipelineBytes)
	}
	root, err := parseOneDocument(data)
	if err != nil {
		return Pipeline{}, err
	}
	if root.Kind != yaml.MappingNode {
		return Pipeline{}, errors.New("must be a mapping with name and jobs")
	}
	var p Pipeline
	var jobs *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode {
				return Pipeline{}, errors.New("name: must be a string")
			}
			p.Name = v.Value
		case "jobs":
			jobs = v
		default:
			return Pipeline{}, fmt.Errorf("%s: unknown field (want one of name, jobs)", k.Value)
		}
	}
	if jobs == nil || jobs.Kind != yaml.SequenceNode || len(jobs.Content) == 0 {
		return Pipeline{}, errors.New("jobs: must be a list of declarations, at least one")
	}
	if len(jobs.Content) > MaxPipelineJobs {
		return Pipeline{}, fmt.Errorf("jobs: lists %d jobs, over the %d a pipeline may have", len(jobs.Content), MaxPipelineJobs)
	}
	if p.Name != "" {
		if _, _, err := ParseLabel("pipeline=" + p.Name); err != nil {
			return Pipeline{}, fmt.Errorf("name: %q cannot label the pipeline's jobs: %w", p.Name, err)
		}
	}
	var ps []string
	for i, n := range jobs.Content {
		raw, err := yaml.Marshal(n)
		if err != nil {
			return Pipeline{}, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		d, err := DecodeDeclaration(raw)
		if err != nil {
			ps = append(ps, fmt.Sprintf("jobs[%d]%s: %s", i, nameOf(n), strings.ReplaceAll(err.Error(), "\n", "\n  ")))
			continue
		}
		p.Jobs = append(p.Jobs, d)
	}
	if len(ps) > 0 {
		return Pipeline{}, errors.New(strings.Join(ps, "\n"))
	}
	if _, err := p.Order(); err != nil {
		return Pipeline{}, err
	}
	return p, nil
}

// nameOf is " (NAME)" for a job node with a plain name, for messages.
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			return " (" + n.Content[i+1].Value + ")"
		}
	}
	return ""
}

// Order checks the pipeline's graph and returns its jobs' indices in an
// order that puts every job after those of the file it names: the file's
// own order where it allows.
func (p Pipeline) Order() ([]int, error) {
	byName := make(map[string]int, len(p.Jobs))
	for i, d := range p.Jobs {
		if d.Name == "" {
			return nil, fmt.Errorf("jobs[%d]: name: is required in a pipeline: the other jobs name it", i)
		}
		if j, ok := byName[d.Name]; ok {
			return nil, fmt.Errorf("jobs[%d]: name: %s is the name of jobs[%d] too", i, d.Name, j)
		}
		byName[d.Name] = i
	}
	upstreams := make([][]int, len(p.Jobs))
	for i, d := range p.Jobs {
		for _, ref := range slices.Concat(d.After, d.AfterAny) {
			j, ok := byName[ref]
			if !ok {
				continue // a job of the node, by ID: its daemon checks it
			}
			if j == i {
				return nil, fmt.Errorf("jobs[%d] (%s): is after itself", i, d.Name)
			}
			upstreams[i] = append(upstreams[i], j)
		}
		for k, in := range d.Data {
			ref, _, ok := SplitJobSource(in.Source)
			if !ok {
				continue
			}
			if _, inFile := byName[ref]; inFile && !slices.Contains(d.After, ref) && !slices.Contains(d.AfterAny, ref) {
				return nil, fmt.Errorf("jobs[%d] (%s): data[%d].source %s names job %s, which is not in its after or after_any: "+
					"its output is known only once it completes", i, d.Name, k, in.Source, ref)
			}
		}
	}
	// Kahn's algorithm, taking the lowest index ready each time.
	waiting := make([]int, len(p.Jobs))
	for i := range upstreams {
		waiting[i] = len(upstreams[i])
	}
	done := make([]bool, len(p.Jobs))
	order := make([]int, 0, len(p.Jobs))
	for len(order) < len(p.Jobs) {
		next := -1
		for i := range p.Jobs {
			if !done[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			var cycle []string
			for i, d := range p.Jobs {
				if !done[i] {
					cycle = append(cycle, d.Name)
				}
			}
			return nil, fmt.Errorf("jobs: %s wait for each other in a cycle", strings.Join(cycle, ", "))
		}
		done[next] = true
		order = append(order, next)
		for i := range p.Jobs {
			for _, u := range upstreams[i] {
				if u == next {
					waiting[i]--
				}
			}
		}
	}
	return order, nil
}
