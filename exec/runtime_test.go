package exec

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunDeletesStoppedContainerItself runs jobs through a runtime wrapper
// that records every command that acts on a container, and checks that a job that ends by itself
// costs one runtime process (run), not a run and a delete, and leaves
// nothing behind.
func TestRunDeletesStoppedContainerItself(t *testing.T) {
	real := newTestRunner(t).Runtime()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "runtime")
	script := "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in run|delete|kill|create|start) echo \"$a\" >> " + calls + ";; esac; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(context.Background(), RunnerOptions{
		Runtime:   wrapper,
		StateRoot: filepath.Join(dir, "state"),
		MountRoot: testMountRoot(t),
		Log:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	commands := func() []string {
		b, err := os.ReadFile(calls)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		os.Remove(calls)
		return strings.Fields(string(b))
	}
	commands() // the probe's

	for _, c := range []struct {
		name, script string
		want         Outcome
	}{
		{"exits 0", "true", Completed},
		{"exits 3", "exit 3", Failed},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runJob(t, context.Background(), r, testSpec(t, "", c.script))
			if res.Outcome != c.want {
				t.Fatalf("outcome %s, want %s", res.Outcome, c.want)
			}
			if got := commands(); strings.Join(got, " ") != "run" {
				t.Errorf("runtime commands %v, want only run", got)
			}
			if st, err := os.ReadDir(filepath.Join(dir, "state")); err != nil || len(st) != 0 {
				t.Errorf("runtime state left: %v %v", st, err)
			}
		})
	}
}

func TestRemoveStopped(t *testing.T) {
	const cid = "e31-test"
	setup := func(t *testing.T, config string) (ociRuntime, string) {
		rt := ociRuntime{path: "/nonexistent", root: t.TempDir()}
		if err := os.MkdirAll(filepath.Join(rt.root, cid), 0o700); err != nil {
			t.Fatal(err)
		}
		bundle := t.TempDir()
		if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		return rt, bundle
	}
	noHooks := `{"ociVersion":"1.0.2","hooks":{"createContainer":[{"path":"/bin/true"}]}}`
	t.Run("removes state and cgroups", func(t *testing.T) {
		rt, bundle := setup(t, noHooks)
		removed := false
		if err := rt.removeStopped(cid, bundle, func() error { removed = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if !removed || rt.exists(cid) {
			t.Fatalf("cgroups removed %v, state still there %v", removed, rt.exists(cid))
		}
	})
	for name, c := range map[string]struct {
		config  string
		cgroups error
	}{
		"poststop hooks":    {`{"hooks":{"poststop":[{"path":"/bin/true"}]}}`, nil},
		"cgroup still busy": {noHooks, errors.New("device or resource busy")},
		"no config":         {"", nil},
	} {
		t.Run(name, func(t *testing.T) {
			rt, bundle := setup(t, c.config)
			if c.config == "" {
				os.Remove(filepath.Join(bundle, "config.json"))
			}
			err := rt.removeStopped(cid, bundle, func() error { return c.cgroups })
			if !errors.Is(err, errRuntimeDelete) {
				t.Fatalf("err = %v, want errRuntimeDelete", err)
			}
			if !rt.exists(cid) {
				t.Fatal("the state was removed although the runtime must delete the container")
			}
		})
	}
}
