package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

func TestDescribeTasks(t *testing.T) {
	got := describeTasks(&api.TaskCounts{Total: 10, Completed: 7, Running: 2, Failed: 1})
	if want := "10 tasks: 7 completed, 2 running, 1 failed"; got != want {
		t.Fatalf("describeTasks = %q, want %q", got, want)
	}
}

func TestParseIndices(t *testing.T) {
	dense := &api.TaskCounts{Total: 13}
	got, err := parseIndices("1,3,10-12, 3", dense)
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
		if _, err := parseIndices(spec, dense); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseIndices(%q): %v, want %q", spec, err, want)
		}
	}
	listed := &api.TaskCounts{Total: 5, Indices: []int{3, 7, 40, 41, 42}}
	if got, err := parseIndices("40,7", listed); err != nil || fmt.Sprint(got) != "[7 40]" {
		t.Fatalf("parseIndices of listed tasks = %v, %v", got, err)
	}
	if _, err := parseIndices("4", listed); err == nil || !strings.Contains(err.Error(), "the array has no task 4; its tasks are 3,7,40-42") {
		t.Errorf("parseIndices of an unlisted task: %v", err)
	}
}

// The line that says how a job ended names an attribution only when there
// is one: an array's failure has none.
func TestEndingDetail(t *testing.T) {
	for _, tc := range []struct{ attribution, exit, want string }{
		{"job", ", exit code 3", " (attributed to job, exit code 3)"},
		{"provider", "", " (attributed to provider)"},
		{"", ", exit code 1", " (exit code 1)"},
		{"", "", ""},
	} {
		if got := endingDetail(tc.attribution, tc.exit); got != tc.want {
			t.Errorf("endingDetail(%q, %q) = %q, want %q", tc.attribution, tc.exit, got, tc.want)
		}
	}
}
