package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkDir: a job's WorkDir is where its command starts, with or without
// an image, over the image's WorkingDir, and created when missing (as
// docker run -w does); relative paths in the command resolve there.
func TestWorkDir(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	code := t.TempDir()
	must(t, os.WriteFile(filepath.Join(code, "train.sh"), []byte("echo trained from $PWD > /out/result\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(code, "data"), 0o755))
	must(t, os.WriteFile(filepath.Join(code, "data", "x.csv"), []byte("1,2\n"), 0o644))

	for _, c := range []struct {
		name    string
		image   bool
		workdir string
		script  string
		want    string
	}{
		{"no image, an input", false, "/code", `cat data/x.csv >&2 && sh train.sh`, "trained from /code\n"},
		{"image, an input over WorkingDir", true, "/code", `cat data/x.csv >&2 && sh train.sh`, "trained from /code\n"},
		{"image, a folder not in it", true, "/work/run", `echo "$PWD" > /out/result`, "/work/run\n"},
		{"no image, a folder under the output", false, "/out/logs", `echo here > f && echo "$PWD $(cat /out/logs/f)" > /out/result`, "/out/logs here\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testSpec(t, "", c.script)
			if c.image {
				s = imageSpec(t, "", layers, c.script)
				s.Image.Config.WorkingDir = "/opt/app"
			}
			s.Inputs = []Mount{{Source: code, Target: "/code"}}
			s.WorkDir = c.workdir
			res := runJob(t, context.Background(), r, s)
			wantOutcome(t, res, Completed, ByJob)
			if got := readFile(t, filepath.Join(s.Output.Source, "result")); got != c.want {
				t.Errorf("result %q, want %q", got, c.want)
			}
		})
	}
	t.Run("missing in an input", func(t *testing.T) {
		s := testSpec(t, "", "true")
		s.Inputs = []Mount{{Source: code, Target: "/code"}}
		s.WorkDir = "/code/missing"
		res := runJob(t, context.Background(), r, s)
		wantOutcome(t, res, Failed, ByJob)
		if !strings.Contains(res.Reason, "working directory /code/missing") {
			t.Errorf("reason %q does not name the working directory", res.Reason)
		}
		if _, err := os.Stat(filepath.Join(code, "missing")); err == nil {
			t.Error("the working directory was made in the input's host folder")
		}
	})
	t.Run("a file in the checkpoint where it goes", func(t *testing.T) {
		s := testSpec(t, "", "true")
		ckpt := filepath.Join(s.Dir, "ckpt")
		must(t, os.MkdirAll(ckpt, 0o700))
		must(t, os.WriteFile(filepath.Join(ckpt, "logs"), []byte("x"), 0o600))
		s.Checkpoint = &Mount{Source: ckpt, Target: "/ckpt"}
		s.WorkDir = "/ckpt/logs/run1"
		res := runJob(t, context.Background(), r, s)
		wantOutcome(t, res, Failed, ByJob)
		if got := readFile(t, res.Stderr); !strings.Contains(got, "working directory /ckpt/logs/run1") {
			t.Errorf("stderr %q does not name the working directory", got)
		}
	})
	t.Run("relative", func(t *testing.T) {
		s := testSpec(t, "", "true")
		s.WorkDir = "code"
		if _, err := r.Run(context.Background(), s); !errors.Is(err, ErrSpec) {
			t.Fatalf("a relative WorkDir: %v, want ErrSpec", err)
		}
		assertGone(t, r, s)
	})
	assertNoMounts(t, r)
}

func TestInside(t *testing.T) {
	for _, c := range []struct {
		dir, p, rel string
		ok          bool
	}{
		{"/out", "/out", ".", true},
		{"/out", "/out/logs/a", "logs/a", true},
		{"/out", "/outside", "", false},
		{"/out", "/", "", false},
		{"/out", "", "", false},
		{"/", "/code", "code", true},
	} {
		rel, ok := inside(c.dir, c.p)
		if rel != c.rel || ok != c.ok {
			t.Errorf("inside(%q, %q) = %q, %v; want %q, %v", c.dir, c.p, rel, ok, c.rel, c.ok)
		}
	}
}
