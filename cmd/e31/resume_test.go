package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
)

// TestResumeRequest: e31 resume's flags become the request the daemon
// reads: indices in order, each once; the new declaration read with its
// paths made absolute where the file is; the image and inputs with theirs
// made absolute here; and the flags that contradict each other refused,
// naming them.
func TestResumeRequest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fix.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	with := filepath.Join(dir, "fixed.yaml")
	if err := os.WriteFile(with, []byte("name: fixed\nwork: {command: [python3, /code/fix.py]}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\ndata: [{source: ./fix.py, mount: /code/fix.py}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := resumeRequest(resumeOptions{indices: "40,7,0-2,7", with: with}, "arr")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 7, 40}; req.ResumeOf != "arr" || !slices.Equal(req.Tasks, want) {
		t.Fatalf("resume_of %q, tasks %v, want %v", req.ResumeOf, req.Tasks, want)
	}
	d, err := market.DecodeDeclaration(req.Declaration)
	if err != nil || d.Name != "fixed" || d.Data[0].Source != filepath.Join(dir, "fix.py") {
		t.Fatalf("the new declaration: %+v, %v", d.Data, err)
	}

	t.Chdir(dir)
	req, err = resumeRequest(resumeOptions{inputs: []string{"fix.py:/code/fix.py/"}}, "arr")
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Data) != 1 || req.Data[0].Source != filepath.Join(dir, "fix.py") || req.Data[0].Mount != "/code/fix.py" || req.Declaration != nil {
		t.Fatalf("--input: %+v", req.Data)
	}

	for _, c := range []struct {
		o    resumeOptions
		want string
	}{
		{resumeOptions{failed: true, indices: "1"}, "--failed and --indices"},
		{resumeOptions{with: with, image: "docker://busybox:1"}, "not with --image or --input"},
		{resumeOptions{indices: "3-1"}, "ends before it starts"},
		{resumeOptions{inputs: []string{"nomount"}}, "want SRC:MOUNT"},
		{resumeOptions{inputs: []string{"missing.bin:/in"}}, "missing.bin"},
		{resumeOptions{with: filepath.Join(dir, "absent.yaml")}, "--with"},
	} {
		if _, err := resumeRequest(c.o, "arr"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}
