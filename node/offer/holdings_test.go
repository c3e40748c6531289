package offer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/content"
)

// TestHeldContent: the offer names what the store keeps pinned, large
// enough to matter, at its size, and forgets it once it is unpinned.
func TestHeldContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := content.Open(ctx, filepath.Join(dir, "blocks"), content.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte(name), n/len(name)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big, _, err := store.Import(ctx, write("dataset", 3<<20), content.ImportOptions{Pin: "input of lease a"})
	if err != nil {
		t.Fatal(err)
	}
	small, _, err := store.Import(ctx, write("notes", 4<<10), content.ImportOptions{Pin: "input of lease a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Import(ctx, write("unpinned", 3<<20), content.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	held := newHeldContent(store)
	h, err := held.summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if len(h.Roots) != 1 || h.Roots[0].Root != big.String() || h.Roots[0].Size < 3<<20 || len(h.Bloom) != 0 {
		t.Fatalf("holdings %+v, want only %s (not the small %s nor the unpinned import)", h, big, small)
	}
	again, _ := held.summary(ctx)
	if !again.Equal(h) {
		t.Fatal("the same pins give other holdings")
	}
	if err := store.Unpin(ctx, big, "input of lease a"); err != nil {
		t.Fatal(err)
	}
	if h, _ := held.summary(ctx); !h.IsZero() {
		t.Fatalf("after unpinning, holdings %+v", h)
	}
	if len(held.sizes) != 1 {
		t.Fatalf("sizes of %d roots kept, want only the pinned one", len(held.sizes))
	}
}
