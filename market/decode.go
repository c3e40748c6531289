package market

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// aliasBudget is how many nodes YAML aliases may expand to in one
// declaration. Anchors are handy for repeating an env block, which takes a
// few dozen nodes; a "billion laughs" document takes billions. The budget is
// charged before a subtree is walked, so a bomb costs at most this many
// steps.
const aliasBudget = 1000

// DecodeDeclaration reads a declaration written in YAML (or JSON, which is
// YAML). Decoding is strict: every unknown field, missing section, value of
// the wrong type and broken rule is reported, each under its field path, in
// one *DeclarationError. Fields left out take their defaults before the
// rules are checked: request.cpus 1, request.memory 1GiB and, with
// resume: auto, output.checkpoints.max_resumes 3. request.gpus may be 0 for
// a CPU-only job.
func DecodeDeclaration(data []byte) (Declaration, error) {
	var ps problems
	if len(data) > MaxDeclarationBytes {
		ps.add("", "is %d bytes; a declaration may be at most %d", len(data), MaxDeclarationBytes)
		return Declaration{}, ps.err()
	}
	root, err := parseOneDocument(data)
	if err != nil {
		ps.add("", "%v", err)
		return Declaration{}, ps.err()
	}
	dc := decoder{budget: aliasBudget}
	d := dc.declaration(root)
	if err := dc.ps.err(); err != nil {
		// Rule checks on fields that failed to decode would only repeat the
		// same complaint in other words.
		var rules problems
		validate(&d, &rules)
		for _, p := range rules.list {
			if !dc.covers(p.Field) {
				dc.ps.add(p.Field, "%s", p.Message)
			}
		}
		slices.SortStableFunc(dc.ps.list, func(a, b Problem) int {
			return cmp.Compare(sectionRank(a.Field), sectionRank(b.Field))
		})
		return Declaration{}, dc.ps.err()
	}
	if err := d.Validate(); err != nil {
		return Declaration{}, err
	}
	return d, nil
}

// sectionRank orders problems as the sections appear in a declaration, so
// that decoding and rule problems read top to bottom together.
func sectionRank(field string) int {
	top, _, _ := strings.Cut(field, ".")
	top, _, _ = strings.Cut(top, "[")
	switch top {
	case "":
		return 0
	case "name":
		return 1
	case "work":
		return 2
	case "data":
		return 3
	case "request":
		return 4
	case "output":
		return 5
	}
	return 6
}

// parseOneDocument parses data into a node tree without expanding aliases
// (yaml keeps an alias as a pointer to its anchor, so the tree is no larger
// than the text) and refuses a stream of several documents, whose later
// parts would otherwise be silently ignored.
func parseOneDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("is empty: want a mapping with work, request and output")
		}
		return nil, fmt.Errorf("is not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("must be a single YAML document")
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// decoder turns a node tree into a Declaration, collecting problems instead
// of stopping at the first.
type decoder struct {
	ps     problems
	budget int      // alias expansion left, in nodes
	blown  bool     // the alias budget is spent; further aliases are refused
	failed []string // fields with a decoding problem
}

func (dc *decoder) fail(field, format string, args ...any) {
	dc.failed = append(dc.failed, field)
	dc.ps.add(field, format, args...)
}

// covers reports whether a rule problem on field is already explained by a
// decoding problem on it or on a section that contains it.
func (dc *decoder) covers(field string) bool {
	for _, f := range dc.failed {
		if f == "" || field == f || strings.HasPrefix(field, f+".") || strings.HasPrefix(field, f+"[") {
			return true
		}
	}
	return false
}

// resolve follows aliases, charging their expansion to the budget. It
// returns nil, after reporting why, when the budget is spent.
func (dc *decoder) resolve(n *yaml.Node, field string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		if dc.blown {
			dc.fail(field, "uses a YAML alias after the alias budget was spent")
			return nil
		}
		size := subtreeSize(n.Alias, dc.budget+1)
		dc.budget -= size
		if dc.budget < 0 {
			dc.blown = true
			dc.fail(field, "uses YAML aliases that expand to more than %d nodes", aliasBudget)
			return nil
		}
		n = n.Alias
	}
	return n
}

// subtreeSize counts the nodes under n, aliases expanded, stopping once the
// count reaches limit so that the count of a bomb costs no more than limit.
func subtreeSize(n *yaml.Node, limit int) int {
	count := 0
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || count >= limit {
			return
		}
		count++
		if n.Kind == yaml.AliasNode {
			walk(n.Alias)
			return
		}
		for _, c := range n.Content {
			if count >= limit {
				return
			}
			walk(c)
		}
	}
	walk(n)
	return count
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("%q", v)
	default:
		return "something else"
	}
}

// fields walks a mapping, calling fn for each key in document order. It
// reports non-scalar keys, merge keys and keys given twice. It returns false,
// after reporting, when n is not a mapping.
func (dc *decoder) fields(n *yaml.Node, field, want string, fn func(key, keyField string, v *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		dc.fail(field, "must be %s, not %s", want, kindName(n))
		return false
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := dc.resolve(n.Content[i], field)
		if k == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			dc.fail(field, "has a key that is %s; keys must be plain names", kindName(k))
			continue
		}
		kf := joinField(field, k.Value)
		if k.Tag == "!!merge" {
			dc.fail(kf, "merge keys (<<) are not supported; write the fields out")
			continue
		}
		if seen[k.Value] {
			dc.fail(kf, "is given twice")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, kf, n.Content[i+1])
	}
	return true
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (dc *decoder) unknown(field string, known string) {
	dc.fail(field, "unknown field (want one of %s)%s", known, suggestField(field, strings.Split(known, ", ")))
}

// section resolves a mapping-valued field; nil means absent or unusable.
func (dc *decoder) section(v *yaml.Node, field string) *yaml.Node {
	v = dc.resolve(v, field)
	if isNull(v) {
		return nil
	}
	return v
}

func (dc *decoder) declaration(n *yaml.Node) Declaration {
	var d Declaration
	var haveWork, haveRequest, haveOutput bool
	n = dc.resolve(n, "")
	if n == nil {
		return d
	}
	ok := dc.fields(n, "", "a mapping with name, work, data, request, output and labels", func(key, f string, v *yaml.Node) {
		switch key {
		case "name":
			d.Name, _ = dc.str(v, f)
		case "work":
			if s := dc.section(v, f); s != nil {
				haveWork = true
				d.Work = dc.work(s, f)
			}
		case "data":
			d.Data = dc.data(v, f)
		case "request":
			if s := dc.section(v, f); s != nil {
				haveRequest = true
				d.Request = dc.request(s, f)
			}
		case "output":
			if s := dc.section(v, f); s != nil {
				haveOutput = true
				d.Output = dc.output(s, f)
			}
		case "labels":
			d.Labels = dc.labels(v, f)
		case "after":
			d.After = dc.strings(v, f)
		case "after_any":
			d.AfterAny = dc.strings(v, f)
		case "array":
			if s := dc.section(v, f); s != nil {
				d.Array = dc.array(s, f)
			}
		case "secrets":
			d.Secrets = dc.secrets(v, f)
		case "verify":
			if s := dc.section(v, f); s != nil {
				d.Verify = dc.verify(s, f)
			}
		default:
			dc.unknown(f, "name, work, data, request, output, labels, after, after_any, array, secrets, verify")
		}
	})
	if !ok {
		return d
	}
	if !haveWork {
		dc.fail("work", "is required: the command to run, such as command: [python3, train.py]")
	}
	if !haveRequest {
		dc.fail("request", "is required: the compute to hold and its limit, such as gpus: 1 and limit: 8h")
	}
	if !haveOutput {
		dc.fail("output", "is required: the path that comes back, such as path: /out")
	}
	return d
}

func (dc *decoder) work(n *yaml.Node, field string) Work {
	var w Work
	dc.fields(n, field, "a mapping with image, command, env and workdir", func(key, f string, v *yaml.Node) {
		switch key {
		case "image":
			w.Image, _ = dc.str(v, f)
		case "image_ref":
			w.ImageRef, _ = dc.str(v, f)
		case "image_size":
			w.ImageSize, _ = dc.size(v, f)
		case "command":
			w.Command = dc.strings(v, f)
		case "env":
			w.Env = dc.env(v, f)
		case "workdir":
			w.Workdir, _ = dc.str(v, f)
		case "secrets":
			dc.fail(f, "goes at the top level of the declaration, beside work: secrets: [{name: HF_TOKEN}]")
		default:
			dc.unknown(f, "image, command, env, workdir")
		}
	})
	return w
}

func (dc *decoder) array(n *yaml.Node, field string) *Array {
	var a Array
	dc.fields(n, field, "a mapping with count, indices, values, values_file, parallel and max_failures", func(key, f string, v *yaml.Node) {
		switch key {
		case "count":
			a.Count, _ = dc.int(v, f)
		case "indices":
			a.Indices = dc.indices(v, f)
		case "max_failures":
			a.MaxFailures, _ = dc.int(v, f)
		case "values":
			if v := dc.resolve(v, f); v != nil && v.Kind == yaml.SequenceNode && len(v.Content) > MaxArrayTasks {
				dc.fail(f, "must list at most %d values", MaxArrayTasks)
				return
			}
			a.Values = dc.strings(v, f)
		case "values_file":
			a.ValuesFile, _ = dc.str(v, f)
		case "parallel":
			a.Parallel, _ = dc.int(v, f)
		default:
			dc.unknown(f, "count, indices, values, values_file, parallel, max_failures")
		}
	})
	return &a
}

// indices decodes an array's task indices: a list of whole numbers, or
// the flag's text of indices and ranges ("0-9,40,73", sorted here).
func (dc *decoder) indices(n *yaml.Node, field string) []int {
	n = dc.resolve(n, field)
	if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		idx, err := ParseIndexList(n.Value)
		if err != nil {
			dc.fail(field, "%v", err)
		}
		return idx
	}
	if n = dc.expect(n, field, yaml.SequenceNode, "", "a list of task indices such as [7, 40, 73], or text such as \"0-9,40,73\""); n == nil {
		return nil
	}
	if len(n.Content) > MaxArrayTasks {
		dc.fail(field, "must list at most %d indices", MaxArrayTasks)
		return nil
	}
	out := make([]int, 0, len(n.Content))
	for i, c := range n.Content {
		if v, ok := dc.int(c, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil // as absent: count or values give the tasks
	}
	return out
}

func (dc *decoder) strings(n *yaml.Node, field string) []string {
	if n = dc.expect(n, field, yaml.SequenceNode, "", "a list of strings, such as [python3, train.py]"); n == nil {
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		s, _ := dc.str(c, fmt.Sprintf("%s[%d]", field, i))
		out = append(out, s)
	}
	return out
}

func (dc *decoder) env(n *yaml.Node, field string) map[string]string {
	return dc.stringMap(n, field, "a mapping of names to strings", envField)
}

func (dc *decoder) labels(n *yaml.Node, field string) map[string]string {
	return dc.stringMap(n, field, "a mapping of keys to strings, such as {team: vision}", labelField)
}

// stringMap decodes a mapping of strings to strings, want saying what it
// must be and fieldOf naming each entry's field; nil when empty.
func (dc *decoder) stringMap(n *yaml.Node, field, want string, fieldOf func(key string) string) map[string]string {
	n = dc.resolve(n, field)
	if isNull(n) {
		return nil
	}
	out := make(map[string]string)
	dc.fields(n, field, want, func(key, _ string, v *yaml.Node) {
		if s, ok := dc.str(v, fieldOf(key)); ok {
			out[key] = s
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// secrets decodes the list of a job's secrets: each a mapping with name
// and from, or only its name (secrets: [HF_TOKEN]).
func (dc *decoder) secrets(n *yaml.Node, field string) []Secret {
	if n = dc.expect(n, field, yaml.SequenceNode, "", "a list of secrets, such as [{name: HF_TOKEN}]"); n == nil {
		return nil
	}
	if len(n.Content) > MaxSecrets {
		dc.fail(field, "must list at most %d secrets, not %d", MaxSecrets, len(n.Content))
		return nil
	}
	var out []Secret
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		c = dc.resolve(c, f)
		if c == nil {
			continue
		}
		var s Secret
		if c.Kind == yaml.ScalarNode {
			s.Name, _ = dc.str(c, f)
			out = append(out, s)
			continue
		}
		dc.fields(c, f, "a mapping with name and from", func(key, kf string, v *yaml.Node) {
			switch key {
			case "name":
				s.Name, _ = dc.str(v, kf)
			case "from":
				s.From, _ = dc.str(v, kf)
			default:
				dc.unknown(kf, "name, from")
			}
		})
		out = append(out, s)
	}
	return out
}

func (dc *decoder) data(n *yaml.Node, field string) []Input {
	if n = dc.expect(n, field, yaml.SequenceNode, "", "a list of inputs, each with source and mount"); n == nil {
		return nil
	}
	var out []Input
	for i, c := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		var in Input
		c = dc.resolve(c, f)
		if c == nil {
			continue
		}
		dc.fields(c, f, "a mapping with source and mount", func(key, kf string, v *yaml.Node) {
			switch key {
			case "source":
				in.Source, _ = dc.str(v, kf)
			case "mount":
				in.Mount, _ = dc.str(v, kf)
			case "size":
				in.Size, _ = dc.size(v, kf)
			default:
				dc.unknown(kf, "source, mount")
			}
		})
		out = append(out, in)
	}
	return out
}

func (dc *decoder) request(n *yaml.Node, field string) Request {
	var r Request
	var haveCPUs, haveMemory, haveDisk bool
	dc.fields(n, field, "a mapping with gpus, gpu_model, gpu_memory, cpus, memory, disk and limit", func(key, f string, v *yaml.Node) {
		switch key {
		case "gpus":
			r.GPUs, _ = dc.int(v, f)
		case "gpu_model":
			r.GPUModel, _ = dc.str(v, f)
		case "gpu_memory":
			r.GPUMemory, _ = dc.size(v, f)
		case "cpus":
			r.CPUs, haveCPUs = dc.int(v, f)
		case "memory":
			r.Memory, haveMemory = dc.size(v, f)
		case "limit":
			r.Limit, _ = dc.duration(v, f)
		case "disk":
			if r.Disk, haveDisk = dc.size(v, f); haveDisk && r.Disk == 0 {
				// 0 would read as "unset" once encoded.
				dc.fail(f, "must be a size between %s and %s, such as 50GiB (default %s)", Size(MinDisk), Size(MaxDisk), Size(DefaultDisk))
			}
		case "locality":
			r.Locality, _ = dc.str(v, f)
		case "locality_wait":
			r.LocalityWait, _ = dc.duration(v, f)
		case "retries":
			r.Retries, _ = dc.int(v, f)
		case "nodes":
			r.Nodes, _ = dc.int(v, f)
		case "max_price":
			r.MaxPrice, _ = parsed(dc, v, f, "a price per GPU-hour such as 2.40", " or 0.5", ParsePrice)
		default:
			dc.unknown(f, "gpus, gpu_model, gpu_memory, cpus, memory, disk, limit, locality, locality_wait, retries, nodes, max_price")
		}
	})
	if !haveCPUs && !dc.covers(field+".cpus") {
		r.CPUs = DefaultCPUs
	}
	if !haveMemory && !dc.covers(field+".memory") {
		r.Memory = DefaultMemory
	}
	if !haveDisk && !dc.covers(field+".disk") {
		r.Disk = DefaultDisk
	}
	return r
}

func (dc *decoder) output(n *yaml.Node, field string) Output {
	var o Output
	dc.fields(n, field, "a mapping with path and checkpoints", func(key, f string, v *yaml.Node) {
		switch key {
		case "path":
			o.Path, _ = dc.str(v, f)
		case "checkpoints":
			if s := dc.section(v, f); s != nil {
				o.Checkpoints = dc.checkpoints(s, f)
			}
		default:
			dc.unknown(f, "path, checkpoints")
		}
	})
	return o
}

func (dc *decoder) checkpoints(n *yaml.Node, field string) *Checkpoints {
	var c Checkpoints
	var haveMax bool
	dc.fields(n, field, "a mapping with path, every, resume, max_resumes and from", func(key, f string, v *yaml.Node) {
		switch key {
		case "path":
			c.Path, _ = dc.str(v, f)
		case "every":
			c.Every, _ = dc.duration(v, f)
		case "resume":
			c.Resume, _ = dc.str(v, f)
		case "max_resumes":
			c.MaxResumes, haveMax = dc.int(v, f)
		case "from":
			c.From, _ = dc.str(v, f)
		default:
			dc.unknown(f, "path, every, resume, max_resumes, from")
		}
	})
	if c.Resume == ResumeAuto && !haveMax && !dc.covers(field+".max_resumes") {
		c.MaxResumes = DefaultMaxResumes
	}
	return &c
}

// expect resolves n and returns it when it is of kind and, where tag is
// not "", has that tag. It returns nil when n is null, which is no
// problem, and when n is something else, reported as "must be " + want.
func (dc *decoder) expect(n *yaml.Node, field string, kind yaml.Kind, tag, want string) *yaml.Node {
	n = dc.resolve(n, field)
	if isNull(n) {
		return nil
	}
	if n.Kind != kind || tag != "" && n.Tag != tag {
		dc.fail(field, "must be %s, not %s", want, kindName(n))
		return nil
	}
	return n
}

// str reads a scalar as text. Numbers are accepted as their text, so that
// env: {SEED: 1} means "1", as a person writing YAML expects.
func (dc *decoder) str(n *yaml.Node, field string) (string, bool) {
	n = dc.expect(n, field, yaml.ScalarNode, "", "a string")
	if n == nil {
		return "", false
	}
	return n.Value, true
}

func (dc *decoder) int(n *yaml.Node, field string) (int, bool) {
	n = dc.expect(n, field, yaml.ScalarNode, "!!int", "a whole number")
	if n == nil {
		return 0, false
	}
	var v int
	if err := n.Decode(&v); err != nil {
		dc.fail(field, "is too large")
		return 0, false
	}
	return v, true
}

func (dc *decoder) size(n *yaml.Node, field string) (Size, bool) {
	return parsed(dc, n, field, "a size such as 40GiB", " or 512MiB", ParseSize)
}

func (dc *decoder) duration(n *yaml.Node, field string) (Duration, bool) {
	return parsed(dc, n, field, "a duration such as 8h", " or 1h30m", ParseDuration)
}

// parsed reads a scalar with parse. A value that is not a scalar is
// reported as "must be " + want, one that parse refuses as
// "must be " + want + more, with parse's reason.
func parsed[T any](dc *decoder, n *yaml.Node, field, want, more string, parse func(string) (T, error)) (T, bool) {
	var zero T
	n = dc.expect(n, field, yaml.ScalarNode, "", want)
	if n == nil {
		return zero, false
	}
	v, err := parse(n.Value)
	if err != nil {
		dc.fail(field, "must be %s%s: %v", want, more, err)
		return zero, false
	}
	return v, true
}
