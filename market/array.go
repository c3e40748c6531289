package market

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// An Array makes one declaration many tasks: the same work run Count
// times, or once for each of Values. Task i runs the declaration with
// E31_TASK_INDEX=i, E31_TASK_COUNT and, with values, E31_TASK_VALUE set
// (Declaration.Task); the submitter signs and broadcasts the declaration
// once, and every peer's view holds a job for each task, under TaskID.
type Array struct {
	// Count is how many tasks, when there are no Values.
	Count int `json:"count,omitempty" yaml:"count,omitempty"`
	// Values are the tasks' values, one task each.
	Values []string `json:"values,omitempty" yaml:"values,omitempty"`
	// ValuesFile is a local file of values, one a line, that the
	// submitter reads into Values at submit; a broadcast declaration
	// never carries it.
	ValuesFile string `json:"values_file,omitempty" yaml:"values_file,omitempty"`
	// Parallel caps how many of the tasks are leased at once (Slurm's
	// --array 0-99%10); 0 leaves them uncapped.
	Parallel int `json:"parallel,omitempty" yaml:"parallel,omitempty"`
}

// Limits of an array.
const (
	MaxArrayTasks = 100_000
	// MaxTaskValue bounds one task's value: it is an environment
	// variable, not a file.
	MaxTaskValue = 4096
)

// The variables a task sees.
const (
	EnvTaskIndex = "E31_TASK_INDEX"
	EnvTaskCount = "E31_TASK_COUNT"
	EnvTaskValue = "E31_TASK_VALUE"
)

// Tasks is how many tasks the array has.
func (a *Array) Tasks() int {
	if a == nil {
		return 0
	}
	if len(a.Values) > 0 {
		return len(a.Values)
	}
	return a.Count
}

// The variables each part of a gang sees: its rank and the gang's size,
// under E31's names and under the names torch.distributed reads. The
// provider adds what only it knows (MASTER_ADDR, MASTER_PORT and the
// interfaces for Gloo and NCCL). Task sets them over any value the
// declaration's env gives them, so that a part cannot be told a rank
// other than its own.
const (
	EnvNodeRank  = "E31_NODE_RANK"
	EnvNumNodes  = "E31_NUM_NODES"
	EnvWorldSize = "WORLD_SIZE"
	EnvRank      = "RANK"
)

// Task returns the declaration task i of an array runs: the array's own,
// with no array, and the task's variables in its environment. For a gang
// it is the declaration part i runs: the gang's own, request.nodes
// included, with the part's rank and the gang's size in its environment.
// It copies what it changes, so the declaration is left as it is.
func (d Declaration) Task(i int) Declaration {
	t := d
	if d.Request.Gang() {
		env := make(map[string]string, len(d.Work.Env)+4)
		maps.Copy(env, d.Work.Env)
		rank, size := strconv.Itoa(i), strconv.Itoa(d.Request.Nodes)
		env[EnvNodeRank], env[EnvRank] = rank, rank
		env[EnvNumNodes], env[EnvWorldSize] = size, size
		t.Work.Env = env
		return t
	}
	a := d.Array
	t.Array = nil
	env := make(map[string]string, len(d.Work.Env)+3)
	maps.Copy(env, d.Work.Env)
	env[EnvTaskIndex] = strconv.Itoa(i)
	env[EnvTaskCount] = strconv.Itoa(a.Tasks())
	if i >= 0 && i < len(a.Values) {
		env[EnvTaskValue] = a.Values[i]
	}
	t.Work.Env = env
	return t
}

// Parts is how many jobs the declaration makes in every peer's view: one
// per task of an array, one per node of a gang (each under TaskID, with
// the gang's request), and otherwise one.
func (d Declaration) Parts() int {
	switch {
	case d.Array != nil:
		return d.Array.Tasks()
	case d.Request.Gang():
		return d.Request.Nodes
	}
	return 1
}

// TaskID is the ID of task i of the array whose ID is array, and of part
// i of a gang.
func TaskID(array string, i int) string { return array + "." + strconv.Itoa(i) }

// SplitTaskID splits a task's ID into its array's and its index; ok is
// false for the ID of a job that is no task, and for an index not in its
// one spelling (no sign, no leading zero), so that a task has one ID.
func SplitTaskID(id string) (array string, index int, ok bool) {
	array, idx, found := strings.Cut(id, ".")
	if !found || array == "" || idx == "" || len(idx) > 6 || (len(idx) > 1 && idx[0] == '0') {
		return "", 0, false
	}
	for _, c := range idx {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n >= MaxArrayTasks {
		return "", 0, false
	}
	return array, n, true
}

// ParseArrayRange reads the flag form of an array, Slurm's: "0-9999"
// (count 10,000), "100" (count 100) or either with "%P", the cap on tasks
// running at once. A range must start at 0: a task's index is its place
// in the array.
func ParseArrayRange(s string) (Array, error) {
	spec, par, capped := strings.Cut(s, "%")
	var a Array
	if capped {
		p, err := strconv.Atoi(par)
		if err != nil || p < 1 {
			return Array{}, fmt.Errorf("array %q: %%%s must be a number of tasks at once, at least 1", s, par)
		}
		a.Parallel = p
	}
	lo, hi, isRange := strings.Cut(spec, "-")
	if !isRange {
		n, err := strconv.Atoi(spec)
		if err != nil || n < 1 {
			return Array{}, fmt.Errorf("array %q: want a task count or a range such as 0-99", s)
		}
		a.Count = n
		return a, nil
	}
	first, err1 := strconv.Atoi(lo)
	last, err2 := strconv.Atoi(hi)
	switch {
	case err1 != nil || err2 != nil:
		return Array{}, fmt.Errorf("array %q: want a range such as 0-99", s)
	case first != 0:
		return Array{}, fmt.Errorf("array %q: a range starts at 0 (a task's index is its place in the array)", s)
	case last < first:
		return Array{}, fmt.Errorf("array %q: the range ends before it starts", s)
	}
	a.Count = last + 1
	return a, nil
}

func validateArray(a *Array, env map[string]string, ps *problems) {
	if a == nil {
		return
	}
	switch {
	case a.Count != 0 && (len(a.Values) > 0 || a.ValuesFile != ""):
		ps.add("array", "takes count or values (or values_file), not both")
	case len(a.Values) > 0 && a.ValuesFile != "":
		ps.add("array", "takes values or values_file, not both")
	case a.ValuesFile != "":
		validateText("array.values_file", a.ValuesFile, ps)
	case len(a.Values) == 0 && (a.Count < 1 || a.Count > MaxArrayTasks):
		ps.add("array.count", "must be between 1 and %d", MaxArrayTasks)
	case len(a.Values) > MaxArrayTasks:
		ps.add("array.values", "must list at most %d values", MaxArrayTasks)
	}
	for i, v := range a.Values {
		f := fmt.Sprintf("array.values[%d]", i)
		if !validateText(f, v, ps) {
			continue
		}
		if len(v) > MaxTaskValue {
			ps.add(f, "is %d bytes; a task's value may be at most %d (put larger ones in a file the job reads)", len(v), MaxTaskValue)
		}
	}
	if a.Parallel < 0 || (a.Tasks() > 0 && a.Parallel > a.Tasks()) {
		ps.add("array.parallel", "must be between 0 (no cap) and the number of tasks")
	}
	for _, k := range []string{EnvTaskIndex, EnvTaskCount, EnvTaskValue} {
		if _, ok := env[k]; ok {
			ps.add(envField(k), "is set for each task of an array; leave it out")
		}
	}
}
