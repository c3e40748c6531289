package main

import (
	"testing"

	"github.com/e31network/e31/node/api"
)

// The list says how many of an array's tasks ended, and how many of them
// did not complete.
func TestTasksEnded(t *testing.T) {
	for _, tc := range []struct {
		t    api.TaskCounts
		want string
	}{
		{api.TaskCounts{Total: 12, Completed: 12}, "12/12 tasks ended"},
		{api.TaskCounts{Total: 200, Failed: 200}, "200/200 tasks ended, 200 failed"},
		{api.TaskCounts{Total: 10, Completed: 3, Failed: 1, Withdrawn: 2, Running: 4}, "6/10 tasks ended, 1 failed, 2 withdrawn"},
	} {
		if got := tasksEnded(&tc.t); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.t, got, tc.want)
		}
	}
}
