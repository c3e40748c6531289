package main

import (
	"fmt"

	"github.com/e31network/e31/node/api"
)

// tasksEnded is an array's progress for a list: "7/12 tasks ended",
// with ", 3 failed" and ", 2 withdrawn" where some did. "Ended" is over in
// any way; "completed" is reserved for success.
func tasksEnded(t *api.TaskCounts) string {
	s := fmt.Sprintf("%d/%d tasks ended", t.Completed+t.Failed+t.Withdrawn, t.Total)
	if t.Failed > 0 {
		s += fmt.Sprintf(", %d failed", t.Failed)
	}
	if t.Withdrawn > 0 {
		s += fmt.Sprintf(", %d withdrawn", t.Withdrawn)
	}
	return s
}
