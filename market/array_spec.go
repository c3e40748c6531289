package market

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseArrayRange reads the flag form of an array, Slurm's: "100" (count
// 100, tasks 0 to 99), a range "0-9999", a list of indices and ranges
// "7,40,73" or "0-9,40,73", any of them with "%P", the cap on tasks
// running at once, which applies to the whole array. A lone number is a
// count, as it always was in E31 (Slurm reads it as one index: write
// 40-40 for that). Tasks keep the indices listed; an array of 0 to N-1 is
// a Count, which every peer reads, and any other list is Indices.
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
	if !strings.ContainsAny(spec, ",-") {
		n, err := strconv.Atoi(strings.TrimSpace(spec))
		if err != nil || n < 1 {
			return Array{}, fmt.Errorf("array %q: want a task count, a range such as 0-99 or a list such as 7,40,73", s)
		}
		a.Count = n
		return a, nil
	}
	idx, err := ParseIndexList(spec)
	if err != nil {
		return Array{}, fmt.Errorf("array %q: %w", s, err)
	}
	if idx[0] == 0 && idx[len(idx)-1] == len(idx)-1 {
		a.Count = len(idx)
	} else {
		a.Indices = idx
	}
	return a, nil
}

// ParseIndexList reads a list of task indices and ranges, "0-9,40,73",
// as the indices it names, lowest first, each once; each is below
// MaxArrayTasks, and so is how many there are.
func ParseIndexList(spec string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.Atoi(hi)
		}
		switch {
		case part == "" || err1 != nil || err2 != nil || first < 0 || strings.HasPrefix(lo, "+") || strings.HasPrefix(hi, "+"):
			return nil, fmt.Errorf("%q is not an index or a range: want indices such as 7,40,73 or 0-9,40", part)
		case last < first:
			return nil, fmt.Errorf("%s ends before it starts", part)
		case last >= MaxArrayTasks:
			return nil, fmt.Errorf("%s: a task's index is below %d", part, MaxArrayTasks)
		}
		for i := first; i <= last; i++ {
			if !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// FormatIndexList writes sorted indices in the form ParseIndexList
// reads, runs of three or more as ranges: 0-9,40,73.
func FormatIndexList(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		switch {
		case j-i >= 2:
			fmt.Fprintf(&b, "%d-%d", idx[i], idx[j])
		case j > i:
			fmt.Fprintf(&b, "%d,%d", idx[i], idx[j])
		default:
			b.WriteString(strconv.Itoa(idx[i]))
		}
		i = j + 1
	}
	return b.String()
}

// validateIndices checks an array's listed indices: each below
// MaxArrayTasks (and, with values, below their number), lowest first,
// each once, so that an array has one spelling and its tasks one ID each.
func validateIndices(a *Array, ps *problems) {
	if len(a.Indices) > MaxArrayTasks {
		ps.add("array.indices", "must list at most %d indices", MaxArrayTasks)
		return
	}
	for k, i := range a.Indices {
		f := fmt.Sprintf("array.indices[%d]", k)
		switch {
		case i < 0 || i >= MaxArrayTasks:
			ps.add(f, "is %d; an index is between 0 and %d", i, MaxArrayTasks-1)
			return
		case k > 0 && i <= a.Indices[k-1]:
			ps.add(f, "is %d after %d: list the indices lowest first, each once", i, a.Indices[k-1])
			return
		case len(a.Values) > 0 && i >= len(a.Values):
			ps.add(f, "is %d, but there are %d values: a listed task takes the value of its index", i, len(a.Values))
			return
		}
	}
}
