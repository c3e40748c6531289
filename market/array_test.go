package market

import (
	"strings"
	"testing"
)

const arrayDecl = `name: sweep
work: {command: [sim], env: {A: "1"}}
request: {gpus: 0, cpus: 1, limit: 10m}
output: {path: /out}
array: {values: [lr=1e-3, lr=3e-4, lr=1e-4], parallel: 2}
`

func TestDecodeArray(t *testing.T) {
	d, err := DecodeDeclaration([]byte(arrayDecl))
	if err != nil {
		t.Fatal(err)
	}
	if d.Array.Tasks() != 3 || d.Array.Parallel != 2 {
		t.Fatalf("array %+v", d.Array)
	}
	task := d.Task(1)
	if task.Array != nil {
		t.Fatal("a task's declaration keeps the array")
	}
	want := map[string]string{"A": "1", EnvTaskIndex: "1", EnvTaskCount: "3", EnvTaskValue: "lr=3e-4"}
	for k, v := range want {
		if task.Work.Env[k] != v {
			t.Errorf("task env %s = %q, want %q", k, task.Work.Env[k], v)
		}
	}
	if _, ok := d.Work.Env[EnvTaskIndex]; ok {
		t.Fatal("Task changed the array's own environment")
	}
	// A task's declaration is one job's: its resumption is declared so.
	if err := task.Validate(); err != nil {
		t.Fatalf("a task's declaration: %v", err)
	}
	if (&Array{Count: 4}).Tasks() != 4 {
		t.Fatal("count")
	}
}

func TestArrayRejections(t *testing.T) {
	for _, tc := range []struct{ array, want string }{
		{"{count: 0}", "array.count: must be between 1 and 100000"},
		{"{count: 100001}", "array.count: must be between 1 and 100000"},
		{"{count: 2, values: [a, b]}", "array: takes count or values (or values_file), not both"},
		{"{values: [a], values_file: /v}", "array: takes values or values_file, not both"},
		{"{count: 3, parallel: -1}", "array.parallel: must be 0 (no cap) or more"},
		{"{count: 3, max_failures: -1}", "array.max_failures: must be 0 (no bound) or more"},
		{"{count: 3, seed: 4}", "array.seed: unknown field (want one of count, indices, values, values_file, parallel, max_failures)"},
		{"[1, 2]", "array: must be a mapping with count, indices, values, values_file, parallel and max_failures"},
		{"{count: 3, indices: [1, 2]}", "array: takes count or indices, not both"},
		{"{indices: [2, 1]}", "array.indices[1]: is 1 after 2: list the indices lowest first, each once"},
		{"{indices: [2, 2]}", "array.indices[1]: is 2 after 2"},
		{"{indices: [-1]}", "array.indices[0]: is -1; an index is between 0 and 99999"},
		{"{indices: [100000]}", "array.indices[0]: is 100000"},
		{"{indices: [0, 3], values: [a, b]}", "array.indices[1]: is 3, but there are 2 values"},
		{"{indices: \"3-1\"}", "array.indices: 3-1 ends before it starts"},
		{"{indices: \"1,x\"}", "array.indices: \"x\" is not an index or a range"},
		{"{indices: [1, x]}", "array.indices[1]: must be a whole number"},
		{"{indices: 7}", "array.indices: must be a list of task indices"},
		{"{values: [\"" + strings.Repeat("x", MaxTaskValue+1) + "\"]}", "array.values[0]: is 4097 bytes"},
	} {
		doc := strings.Replace(arrayDecl, "{values: [lr=1e-3, lr=3e-4, lr=1e-4], parallel: 2}", tc.array, 1)
		_, err := DecodeDeclaration([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("array %.40s: got %v, want %q", tc.array, err, tc.want)
		}
	}
	doc := strings.Replace(arrayDecl, `env: {A: "1"}`, `env: {E31_TASK_VALUE: "1"}`, 1)
	if _, err := DecodeDeclaration([]byte(doc)); err == nil || !strings.Contains(err.Error(), "work.env.E31_TASK_VALUE: is set for each task") {
		t.Errorf("an array that sets E31_TASK_VALUE itself: %v", err)
	}
}

func TestTaskID(t *testing.T) {
	id := TaskID("abcd", 42)
	a, i, ok := SplitTaskID(id)
	if !ok || a != "abcd" || i != 42 {
		t.Fatalf("SplitTaskID(%q) = %q, %d, %v", id, a, i, ok)
	}
	for _, bad := range []string{"abcd", "abcd.", ".1", "abcd.01", "abcd.-1", "abcd.+1", "abcd.1x", "abcd.100000", "abcd.9999999"} {
		if _, _, ok := SplitTaskID(bad); ok {
			t.Errorf("SplitTaskID(%q) takes it as a task", bad)
		}
	}
	if _, _, ok := SplitTaskID("abcd.0"); !ok {
		t.Error("task 0 is no task")
	}
}

func TestParseArrayRange(t *testing.T) {
	for _, tc := range []struct {
		in          string
		count, par  int
		wantErrText string
	}{
		{in: "0-9999%200", count: 10000, par: 200},
		{in: "0-9", count: 10},
		{in: "25", count: 25},
		{in: "10%1", count: 10, par: 1},
		{in: "0-x", wantErrText: `"0-x" is not an index or a range`},
		{in: "9-0", wantErrText: "9-0 ends before it starts"},
		{in: "0-100000", wantErrText: "a task's index is below 100000"},
		{in: "1,,2", wantErrText: `"" is not an index or a range`},
		{in: "-1", wantErrText: `"-1" is not an index or a range`},
		{in: "0", wantErrText: "want a task count"},
		{in: "0-9%0", wantErrText: "%0 must be a number of tasks at once"},
	} {
		a, err := ParseArrayRange(tc.in)
		if tc.wantErrText != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
				t.Errorf("ParseArrayRange(%q): %v, want %q", tc.in, err, tc.wantErrText)
			}
			continue
		}
		if err != nil || a.Count != tc.count || a.Parallel != tc.par {
			t.Errorf("ParseArrayRange(%q) = %+v, %v", tc.in, a, err)
		}
	}
}

// SplitTaskID reads job IDs from the network (leases, withdrawals): it
// never panics, and what it takes as a task it spells back the same.
func FuzzSplitTaskID(f *testing.F) {
	for _, s := range []string{"abcd.0", "abcd.99999", "abcd.01", "a.b.c", ".", "x.-1", "x.1e3", "zqjja36765bvzgyj.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		a, i, ok := SplitTaskID(id)
		if ok && TaskID(a, i) != id {
			t.Fatalf("SplitTaskID(%q) = %q, %d: spelled back %q", id, a, i, TaskID(a, i))
		}
	})
}
