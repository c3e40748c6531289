package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

func TestIndexRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{1, 2, 3, 7, 9, 10}, "1-3,7,9-10"},
		{[]int{0}, "0"},
		{[]int{4, 5}, "4-5"},
		{nil, ""},
	} {
		if got := indexRanges(tc.in); got != tc.want {
			t.Errorf("indexRanges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDescribeTasks(t *testing.T) {
	got := describeTasks(&api.TaskCounts{Total: 10, Completed: 7, Running: 2, Failed: 1})
	if want := "10 tasks: 7 completed, 2 running, 1 failed"; got != want {
		t.Fatalf("describeTasks = %q, want %q", got, want)
	}
}

func TestParseIndices(t *testing.T) {
	got, err := parseIndices("1,3,10-12, 3", 13)
	if err != nil || fmt.Sprint(got) != "[1 3 10 11 12]" {
		t.Fatalf("parseIndices = %v, %v", got, err)
	}
	for spec, want := range map[string]string{
		"13":  "the array has tasks 0 to 12",
		"5-2": "5-2 ends before it starts",
		"x":   "want indices such as 7",
		"-1":  "want indices such as 7",
		"":    "want indices such as 7",
	} {
		if _, err := parseIndices(spec, 13); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseIndices(%q): %v, want %q", spec, err, want)
		}
	}
}
