package content

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A name with a control character never enters a DAG: an output import
// leaves the entry out and says so, an input import refuses it naming it.
func TestImportLeavesOutNamesWithControlCharacters(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	dir := t.TempDir()
	for _, name := range []string{"ok", "new\nline", "sub\x1b[1m"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var skipped []string
	root, _, err := s.Import(ctx, dir, ImportOptions{SkipUnsupported: true, OnSkip: func(p, reason string) {
		skipped = append(skipped, ShowPath(p)+": "+reason)
	}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(skipped)
	if len(skipped) != 2 || !strings.HasPrefix(skipped[0], `"new\nline": has a control character`) {
		t.Fatalf("skipped %q", skipped)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, root, out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadDir(out); len(got) != 1 || got[0].Name() != "ok" {
		t.Fatalf("exported %v, want only ok", got)
	}
	_, _, err = s.Import(ctx, dir, ImportOptions{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "has a control character") || hasControl(err.Error()) {
		t.Fatalf("input import: %v, want ErrUnsupported naming the entry, quoted", err)
	}
}
