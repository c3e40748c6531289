package market

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// An Array makes one declaration many tasks: the same work run Count
// times, or once for each of Values, or once for each of Indices. The
// task of index i runs the declaration with E31_TASK_INDEX=i,
// E31_TASK_COUNT (how many tasks the array has, as Slurm's
// SLURM_ARRAY_TASK_COUNT) and, with values, E31_TASK_VALUE set to value
// i (Declaration.Task); the submitter signs and broadcasts the
// declaration once, and every peer's view holds a job for each task,
// under TaskID.
type Array struct {
	// Count is how many tasks, indexed 0 to Count-1, when there are
	// neither Values nor Indices.
	Count int `json:"count,omitempty" yaml:"count,omitempty"`
	// Values are the tasks' values: without Indices, one task each,
	// indexed by place; with them, the values the listed tasks take by
	// their index (the values of a sweep, of which some tasks run again).
	Values []string `json:"values,omitempty" yaml:"values,omitempty"`
	// Indices, when set, are the indices of the array's tasks, lowest
	// first, each once (Slurm's --array 7,40,73): one task each, which
	// keeps its index. A peer of a version before them refuses such a
	// declaration; an array of 0 to N-1 is sent as Count, which every
	// version reads.
	Indices []int `json:"indices,omitempty" yaml:"indices,omitempty"`
	// ValuesFile is a local file of values, one a line, that the
	// submitter reads into Values at submit; a broadcast declaration
	// never carries it.
	ValuesFile string `json:"values_file,omitempty" yaml:"values_file,omitempty"`
	// Parallel caps how many of the tasks are leased at once (Slurm's
	// --array 0-99%10); 0 leaves them uncapped.
	// Above the number of tasks it caps nothing, as Slurm's.
	Parallel int `json:"parallel,omitempty" yaml:"parallel,omitempty"`
	// MaxFailures, when above 0, stops the array at its MaxFailures-th
	// failed task: its submitter withdraws the tasks still queued, lets
	// those running end, and the array ends failed. It is the
	// submitter's alone: kept on its record, never signed or broadcast,
	// so that peers of every version read the array.
	MaxFailures int `json:"max_failures,omitempty" yaml:"max_failures,omitempty"`
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
	if len(a.Indices) > 0 {
		return len(a.Indices)
	}
	if len(a.Values) > 0 {
		return len(a.Values)
	}
	return a.Count
}

// Index is the index of the array's k-th task, lowest first: k itself
// unless the array lists its indices. A nil array (a gang's parts) has
// the identity too.
func (a *Array) Index(k int) int {
	if a == nil || len(a.Indices) == 0 {
		return k
	}
	return a.Indices[k]
}

// Place is where the task of index i comes in the array, lowest first,
// and whether the array has such a task.
func (a *Array) Place(i int) (int, bool) {
	if a == nil || len(a.Indices) == 0 {
		return i, i >= 0 && i < a.Tasks()
	}
	k, found := slices.BinarySearch(a.Indices, i)
	return k, found
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

// Task returns the declaration the task of index i of an array runs:
// the array's own, with no array, and the task's variables in its
// environment. For a gang
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

// Split reports whether the declaration's jobs are under TaskID: those
// of an array of more than one task or of listed indices (whose one task
// keeps its index), and a gang's parts. An array of one task by count is
// one job under the declaration's own ID, as it always was.
func (d Declaration) Split() bool {
	return d.Parts() > 1 || (d.Array != nil && len(d.Array.Indices) > 0)
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

func validateArray(a *Array, env map[string]string, ps *problems) {
	if a == nil {
		return
	}
	switch {
	case len(a.Indices) > 0 && a.Count != 0:
		ps.add("array", "takes count or indices, not both (indices: [7, 40, 73] runs those three tasks)")
	case len(a.Indices) > 0:
		validateIndices(a, ps)
	}
	switch {
	case a.Count != 0 && (len(a.Values) > 0 || a.ValuesFile != ""):
		ps.add("array", "takes count or values (or values_file), not both")
	case len(a.Values) > 0 && a.ValuesFile != "":
		ps.add("array", "takes values or values_file, not both")
	case a.ValuesFile != "":
		validateText("array.values_file", a.ValuesFile, ps)
	case len(a.Values) == 0 && len(a.Indices) == 0 && (a.Count < 1 || a.Count > MaxArrayTasks):
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
	if a.Parallel < 0 {
		ps.add("array.parallel", "must be 0 (no cap) or more")
	}
	if a.MaxFailures < 0 {
		ps.add("array.max_failures", "must be 0 (no bound) or more")
	}
	for _, k := range []string{EnvTaskIndex, EnvTaskCount, EnvTaskValue} {
		if _, ok := env[k]; ok {
			ps.add(envField(k), "is set for each task of an array; leave it out")
		}
	}
}
