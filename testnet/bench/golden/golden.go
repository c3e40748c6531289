// Package golden compares a benchmark report's text with the file that
// holds what it should print, for the benches' tests. With
// E31_UPDATE_GOLDEN=1 in the environment it rewrites the files instead:
//
//	E31_UPDATE_GOLDEN=1 go test ./testnet/bench/...
package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path, or rewrites the file when
// E31_UPDATE_GOLDEN is 1.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if os.Getenv("E31_UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant (%s; E31_UPDATE_GOLDEN=1 go test rewrites it)\n%s", got, path, want)
	}
}
