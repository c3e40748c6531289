package main

import (
	"strings"
	"testing"
)

// TestSubmitWorkdirFlag: --workdir puts work.workdir in the declaration,
// tidied as the other paths inside the job are; a relative one is refused
// naming the field.
func TestSubmitWorkdirFlag(t *testing.T) {
	d, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", outputPath: "/out", workdir: "/code/"}, []string{"true"})
	if err != nil || d.Work.Workdir != "/code" {
		t.Fatalf("--workdir /code/: %q, %v", d.Work.Workdir, err)
	}
	if d, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", outputPath: "/out"}, []string{"true"}); err != nil || d.Work.Workdir != "" {
		t.Fatalf("no --workdir: %q, %v", d.Work.Workdir, err)
	}
	_, err = declarationFromFlags(submitOptions{gpus: 1, limit: "1h", outputPath: "/out", workdir: "code"}, []string{"true"})
	if err == nil || !strings.Contains(err.Error(), "work.workdir") || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("--workdir code: %v, want a refusal naming work.workdir", err)
	}
}
