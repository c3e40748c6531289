package main

import (
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
