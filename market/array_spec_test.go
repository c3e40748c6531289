package market

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseArrayList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		count   int
		indices []int
		par     int
	}{
		{in: "7,40,73", indices: []int{7, 40, 73}},
		{in: "0-9,40,73%5", indices: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 73}, par: 5},
		{in: "73,7,40,7", indices: []int{7, 40, 73}},
		{in: "1-3", indices: []int{1, 2, 3}},
		{in: "40-40", indices: []int{40}},
		// A list of 0 to N-1 is a count, which every peer reads.
		{in: "0-4,5,6", count: 7},
		{in: "2,0,1%9", count: 3, par: 9},
	} {
		a, err := ParseArrayRange(tc.in)
		if err != nil || a.Count != tc.count || !slices.Equal(a.Indices, tc.indices) || a.Parallel != tc.par {
			t.Errorf("ParseArrayRange(%q) = %+v, %v; want count %d, indices %v, parallel %d", tc.in, a, err, tc.count, tc.indices, tc.par)
		}
	}
}

func TestArrayIndices(t *testing.T) {
	doc := strings.Replace(arrayDecl, "{values: [lr=1e-3, lr=3e-4, lr=1e-4], parallel: 2}", `{indices: "0,2", values: [a, b, c], parallel: 9, max_failures: 2}`, 1)
	d, err := DecodeDeclaration([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a := d.Array
	if a.Tasks() != 2 || a.Index(1) != 2 || a.Parallel != 9 || a.MaxFailures != 2 || !d.Split() {
		t.Fatalf("array %+v", a)
	}
	if k, ok := a.Place(2); !ok || k != 1 {
		t.Errorf("Place(2) = %d, %v", k, ok)
	}
	if _, ok := a.Place(1); ok {
		t.Error("Place(1): index 1 is not listed")
	}
	// The task keeps its index, and takes that index's value; the
	// count is the number of tasks, as Slurm's.
	task := d.Task(2)
	want := map[string]string{EnvTaskIndex: "2", EnvTaskCount: "2", EnvTaskValue: "c"}
	for k, v := range want {
		if task.Work.Env[k] != v {
			t.Errorf("task env %s = %q, want %q", k, task.Work.Env[k], v)
		}
	}
	// One listed task is still an array: its task keeps its ID.
	one := Declaration{Array: &Array{Indices: []int{40}}}
	if !one.Split() || (Declaration{Array: &Array{Count: 1}}).Split() {
		t.Error("Split: an array of one listed index is split, one of count 1 is not")
	}
	if (&Array{Count: 3}).Index(2) != 2 {
		t.Error("Index of a counted array")
	}
}

// The flag's list form and its written form agree, whatever the list.
func TestIndexListRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := rapid.SliceOfNDistinct(rapid.IntRange(0, 300), 1, 40, rapid.ID[int]).Draw(t, "indices")
		slices.Sort(set)
		text := FormatIndexList(set)
		got, err := ParseIndexList(text)
		if err != nil || !slices.Equal(got, set) {
			t.Fatalf("ParseIndexList(%q) = %v, %v; want %v", text, got, err, set)
		}
		if len(set) == 1 {
			return // a lone number is a count to ParseArrayRange
		}
		a, err := ParseArrayRange(text)
		if err != nil || a.Tasks() != len(set) {
			t.Fatalf("ParseArrayRange(%q) = %+v, %v", text, a, err)
		}
		for k, i := range set {
			if a.Index(k) != i {
				t.Fatalf("ParseArrayRange(%q): task %d has index %d, want %d", text, k, a.Index(k), i)
			}
		}
		var ps problems
		validateArray(&a, nil, &ps)
		if len(ps.list) > 0 {
			t.Fatalf("ParseArrayRange(%q) = %+v, which validation refuses: %v", text, a, ps.err())
		}
	})
}
