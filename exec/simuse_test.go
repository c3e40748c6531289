package exec

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSimUse(t *testing.T) {
	gpus, err := ParseSimSpec("3xH100:80GiB", "peer")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sim-gpu-use")
	s, err := NewSimUse(dir, gpus)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || s.Dir() != dir {
		t.Fatalf("NewSimUse did not make %s: %v", dir, err)
	}
	ctx := context.Background()
	check := func(want map[int][]int) {
		t.Helper()
		use, err := s.Use(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(use) != len(gpus) {
			t.Fatalf("%d GPUs in the sample, want %d", len(use), len(gpus))
		}
		for i, u := range use {
			if u.Index != i || u.UUID != gpus[i].UUID || u.Utilization != UtilizationUnknown {
				t.Errorf("GPU %d: %+v, want index %d, UUID %s, utilisation unknown", i, u, i, gpus[i].UUID)
			}
			if !slices.Equal(u.ForeignPIDs, want[i]) {
				t.Errorf("GPU %d: foreign PIDs %v, want %v", i, u.ForeignPIDs, want[i])
			}
		}
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	check(nil)
	write("0", "")         // touch: a process of unknown PID
	write("2", "4242\n")   // a PID
	write("7", "")         // no such GPU: ignored
	write("notes.txt", "") // not an index: ignored
	check(map[int][]int{0: {0}, 2: {4242}})
	write("2", "not a pid") // still busy: the file is what counts
	if err := os.Remove(filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
	check(map[int][]int{2: {0}})

	// The directory gone is no use at all, not an error.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	check(nil)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Use(cancelled); err == nil {
		t.Error("Use with a cancelled context did not fail")
	}
}

// A mark that cannot be read is an error, not a GPU silently free.
func TestSimUseUnreadable(t *testing.T) {
	gpus, _ := ParseSimSpec("1xH100:80GiB", "peer")
	dir := t.TempDir()
	s, err := NewSimUse(dir, gpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Use(context.Background()); err == nil {
		t.Error("a directory in place of a mark was not an error")
	}
}
