package content

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
)

// Folder links DAGs the store holds under names: exported, each entry is
// the DAG it names; past a few thousand entries the folder shards and
// still exports whole; a bad or repeated name, or a DAG not held, is
// refused.
func TestFolderOfDAGs(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	src := t.TempDir()
	var roots []cid.Cid
	for i := range 3 {
		d := filepath.Join(src, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "v"), []byte(strconv.Itoa(i*10)), 0o644); err != nil {
			t.Fatal(err)
		}
		root, _, err := s.Import(ctx, d, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, root)
	}
	var entries []FolderEntry
	for i := range 3000 {
		entries = append(entries, FolderEntry{Name: strconv.Itoa(i), Root: roots[i%3]})
	}
	root, err := s.Folder(ctx, entries, "test folder")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, root, dst, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2, 1234, 2999} {
		b, err := os.ReadFile(filepath.Join(dst, strconv.Itoa(i), "v"))
		if err != nil || string(b) != strconv.Itoa(i%3*10) {
			t.Fatalf("entry %d holds %q, %v", i, b, err)
		}
	}
	if ents, err := os.ReadDir(dst); err != nil || len(ents) != 3000 {
		t.Fatalf("exported %d entries, %v; want 3000", len(ents), err)
	}
	pins, err := s.Pins(ctx)
	if err != nil || !slices.ContainsFunc(pins, func(p Pin) bool { return p.Root == root && slices.Contains(p.Reasons, "test folder") }) {
		t.Fatalf("the folder is not pinned: %v, %v", pins, err)
	}

	missing, _ := cid.Decode("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
	for _, tc := range []struct {
		entries []FolderEntry
		want    string
	}{
		{[]FolderEntry{{"a/b", roots[0]}}, "without a slash"},
		{[]FolderEntry{{"", roots[0]}}, "without a slash"},
		{[]FolderEntry{{"x", roots[0]}, {"x", roots[1]}}, "distinct name"},
		{[]FolderEntry{{"x", missing}}, "folder entry x"},
	} {
		if _, err := s.Folder(ctx, tc.entries, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Folder(%v): %v, want %q", tc.entries, err, tc.want)
		}
	}
}
