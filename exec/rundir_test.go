package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRunDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("RunDir works under /run: needs root")
	}
	key := t.TempDir()
	dir, err := RunDir(key)
	if err != nil {
		t.Fatalf("RunDir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if !onTmpfs(dir) {
		t.Fatalf("%s is not on a tmpfs", dir)
	}
	again, err := RunDir(key)
	if err != nil || again != dir {
		t.Fatalf("RunDir again: %q, %v; want %q", again, err, dir)
	}
	other, err := RunDir(key + "/other")
	if err != nil || other == dir {
		t.Fatalf("RunDir of another key: %q, %v", other, err)
	}
	os.Remove(other)

	// A container's state left inside keeps the run directory.
	state := filepath.Join(dir, "runtime", "e31-x")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bundles"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRunDir(dir); err != nil {
		t.Fatalf("RemoveRunDir with a container left: %v", err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("the container's state went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundles")); !os.IsNotExist(err) {
		t.Fatalf("the empty bundle root is still there: %v", err)
	}
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRunDir(dir); err != nil {
		t.Fatalf("RemoveRunDir: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the run directory is still there: %v", err)
	}
}

// With a BundleRoot, the run's bundle is there, not in the lease
// directory, and goes with the run.
func TestBundleRoot(t *testing.T) {
	r := newTestRunner(t)
	r.bundleRoot = t.TempDir()
	s := testSpec(t, "", "sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() { done <- runJob(t, ctx, r, s) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs, err := r.rt.list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(cs, func(c containerState) bool { return c.ID == ContainerID(s.ID) })
		if i >= 0 {
			if want := filepath.Join(r.bundleRoot, ContainerID(s.ID)); cs[i].Bundle != want {
				t.Errorf("bundle at %s, want %s", cs[i].Bundle, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container did not start in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(bundleDir(s.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bundle in the lease directory: %v", err)
	}
	cancel()
	<-done // runJob checks that the bundle went
}

// ensureTmpfs mounts a tmpfs on an empty directory, once, and never over
// files already there.
func TestEnsureTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "state"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureTmpfs(full); err == nil || onTmpfs(full) {
		t.Fatalf("mounted over a directory with files: %v", err)
	}

	empty := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureTmpfs(empty); err != nil {
		t.Fatalf("ensureTmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(empty, 0); err != nil {
			t.Error(err)
		}
	})
	if !onTmpfs(empty) {
		t.Fatal("no tmpfs mounted")
	}
	if err := os.WriteFile(filepath.Join(empty, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Again: already a tmpfs, and what it holds is still there.
	if err := ensureTmpfs(empty); err != nil {
		t.Fatalf("ensureTmpfs again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "x")); err != nil {
		t.Fatalf("a second mount hid the first: %v", err)
	}
}
