package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
)

func TestUnstagedPaths(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"train.py", "run.sh", "data/train.csv"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	decl := func(image string, data []market.Input, cmd ...string) market.Declaration {
		d := market.NewDeclaration("t", cmd, 1, 0, data)
		d.Work.Image = image
		d.Output.Path = "/out"
		return d
	}
	dataIn := []market.Input{{Source: filepath.Join(dir, "data"), Mount: "/data"}}
	for _, tc := range []struct {
		name string
		d    market.Declaration
		want []string // a substring of each note, in order
	}{
		{"script here, not staged", decl("", nil, "python3", "train.py", "--epochs", "3"), []string{`"train.py" is a file here`, "--input ./train.py:/code/train.py"}},
		{"program by relative path", decl("", nil, "./run.sh"), []string{`"./run.sh" is a file here`, "--input ./run.sh:/code/run.sh"}},
		{"a folder inside an input", decl("", dataIn, "python3", "/code/t.py", "data/train.csv"), []string{"the job sees at /data/train.csv"}},
		{"absolute paths and flags", decl("", nil, "python3", "/code/train.py", "--data", "/data", "-v"), nil},
		{"names nothing here", decl("", nil, "sh", "-c", "echo hi > x", "other.py"), nil},
		{"program on the PATH", decl("", nil, "train.py"), nil},
		{"the image may hold it", decl("oci-archive:/x.tar", nil, "python3", "train.py"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := unstagedPaths(tc.d, dir)
			if len(tc.want) == 0 {
				if len(notes) != 0 {
					t.Fatalf("notes %q, want none", notes)
				}
				return
			}
			if len(notes) != 1 {
				t.Fatalf("notes %q, want one", notes)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes[0], w) {
					t.Errorf("note %q lacks %q", notes[0], w)
				}
			}
		})
	}
}
