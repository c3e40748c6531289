package content

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

func TestImportExportTree(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 4)
	s := openStore(t, t.TempDir())
	var p counter
	root, n, err := s.Import(ctx, src, ImportOptions{Progress: &p})
	if err != nil {
		t.Fatal(err)
	}
	if root.Prefix().Version != 1 {
		t.Errorf("root %s is not CIDv1", root)
	}
	if p.starts != 1 || p.dones != 1 || p.n != n || p.total != n {
		t.Errorf("progress total %d count %d starts %d dones %d, imported %d", p.total, p.n, p.starts, p.dones, n)
	}
	again, _, err := s.Import(ctx, src, ImportOptions{})
	if err != nil || again != root {
		t.Fatalf("re-import gave %s, %v; want %s", again, err, root)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, root, dst, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, dst)

	// An existing empty directory is accepted; a non-empty one is not.
	empty := t.TempDir()
	if err := s.Export(ctx, root, empty, ExportOptions{}); err != nil {
		t.Fatalf("export into empty dir: %v", err)
	}
	if err := s.Export(ctx, root, empty, ExportOptions{}); err == nil {
		t.Fatal("export into a non-empty dir succeeded")
	}
}

func TestImportSingleFiles(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	dir := t.TempDir()
	cases := []struct {
		name string
		size int64
		mode os.FileMode
	}{
		{"empty", 0, 0o644},
		{"empty-exec", 0, 0o755},
		{"small", 10, 0o644},
		{"small-exec", 10, 0o750},
		{"big-exec", 2*chunkSize + 5, 0o700},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, c.name)
			writeRandom(t, in, c.size, uint64(i), c.mode)
			root, n, err := s.Import(ctx, in, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n != c.size {
				t.Errorf("imported %d bytes, want %d", n, c.size)
			}
			out := filepath.Join(t.TempDir(), "f")
			if err := s.Export(ctx, root, out, ExportOptions{}); err != nil {
				t.Fatal(err)
			}
			sameTree(t, in, out)
			if err := s.Export(ctx, root, out, ExportOptions{}); err == nil {
				t.Error("export over an existing file succeeded")
			}
		})
	}
}

func TestImportRefusesSymlinksAndCap(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 1)
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "a", "link")); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Import(ctx, src, ImportOptions{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "link") {
		t.Fatalf("symlink import: %v, want ErrUnsupported naming it", err)
	}
	if err := os.Remove(filepath.Join(src, "a", "link")); err != nil {
		t.Fatal(err)
	}

	_, _, err = s.Import(ctx, src, ImportOptions{MaxBytes: 1 << 20})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the cap of 1 MiB") {
		t.Fatalf("capped import: %v, want ErrTooLarge naming size and cap", err)
	}
	if n := countBlocks(t, s); n != 0 {
		t.Errorf("refused imports left %d blocks", n)
	}
}

func TestGCKeepsPinned(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	dir := t.TempDir()
	imp := func(name string, seed uint64, pin string) cid.Cid {
		p := filepath.Join(dir, name)
		writeRandom(t, p, 3*chunkSize, seed, 0o644)
		c, _, err := s.Import(ctx, p, ImportOptions{Pin: pin})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kept := imp("kept", 1, "input of job K")
	loose := imp("loose", 2, "")
	dropped := imp("dropped", 3, "output of lease D")
	if err := s.Unpin(ctx, dropped, "output of lease D"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unpin(ctx, dropped, "output of lease D"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second unpin: %v, want ErrNotFound", err)
	}
	removed, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 8 { // two files of 3 leaves and a root each
		t.Errorf("GC removed %d blocks, want 8", removed)
	}
	for c, want := range map[cid.Cid]bool{kept: true, loose: false, dropped: false} {
		got, err := s.Has(ctx, c)
		if err != nil || got != want {
			t.Errorf("Has(%s) = %v, %v; want %v", c, got, err, want)
		}
	}
	if err := s.Export(ctx, kept, filepath.Join(t.TempDir(), "k"), ExportOptions{}); err != nil {
		t.Errorf("export after GC: %v", err)
	}
	if removed, err := s.GC(ctx); err != nil || removed != 0 {
		t.Errorf("second GC removed %d, %v", removed, err)
	}
}

func TestPinsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 1)

	s, err := Open(ctx, dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := s.Import(ctx, src, ImportOptions{Pin: "input of job X"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(ctx, root, "checkpoint 3 of lease Y"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	pins, err := s.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Pin{{Root: root, Reasons: []string{"checkpoint 3 of lease Y", "input of job X"}}}
	if len(pins) != 1 || pins[0].Root != root || !slices.Equal(pins[0].Reasons, want[0].Reasons) {
		t.Fatalf("pins after reopen: %v, want %v", pins, want)
	}
	if removed, err := s.GC(ctx); err != nil || removed != 0 {
		t.Fatalf("GC of pinned store removed %d, %v", removed, err)
	}
	if err := s.Unpin(ctx, root, "input of job X"); err != nil {
		t.Fatal(err)
	}
	if removed, _ := s.GC(ctx); removed != 0 {
		t.Errorf("GC removed %d blocks still pinned for another reason", removed)
	}
	if err := s.Unpin(ctx, root, "checkpoint 3 of lease Y"); err != nil {
		t.Fatal(err)
	}
	if removed, _ := s.GC(ctx); removed == 0 {
		t.Error("GC removed nothing after the last unpin")
	}
	if n := countBlocks(t, s); n != 0 {
		t.Errorf("%d blocks left", n)
	}
}

func TestPinRefusesIncomplete(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 2*chunkSize, 1, 0o644)
	root, _, err := s.Import(ctx, p, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.scan(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.deleteKeys([][]byte{key(kindSize, sc.held[1].Hash()), key(kindBlock, sc.held[1].Hash())}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(ctx, root, "x"); !errors.Is(err, ErrIncomplete) {
		t.Errorf("pin of incomplete DAG: %v, want ErrIncomplete", err)
	}
	if ok, err := s.Has(ctx, root); ok || err != nil {
		t.Errorf("Has = %v, %v; want false", ok, err)
	}
	if err := s.Export(ctx, root, filepath.Join(t.TempDir(), "o"), ExportOptions{}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("export of incomplete DAG: %v, want ErrIncomplete", err)
	}
}

func TestCorruptBlockFailsReads(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	p := filepath.Join(t.TempDir(), "f")
	writeRandom(t, p, 3*chunkSize, 1, 0o644)
	root, _, err := s.Import(ctx, p, ImportOptions{Pin: "x"})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.scan(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	leaf := sc.held[2]
	corruptBlock(t, s, leaf)
	if _, err := s.getBlock(leaf); !errors.Is(err, ErrInvalidData) {
		t.Errorf("read of corrupt leaf: %v, want ErrInvalidData", err)
	}
	if _, err := (bitswapStore{s}).Get(ctx, leaf); !errors.Is(err, ErrInvalidData) {
		t.Errorf("bitswap read of corrupt leaf: %v, want ErrInvalidData", err)
	}
	if err := s.Export(ctx, root, filepath.Join(t.TempDir(), "o"), ExportOptions{}); !errors.Is(err, ErrInvalidData) {
		t.Errorf("export with corrupt leaf: %v, want ErrInvalidData", err)
	}
	corruptBlock(t, s, root)
	if _, err := s.Has(ctx, root); !errors.Is(err, ErrInvalidData) {
		t.Errorf("Has with corrupt root: %v, want ErrInvalidData", err)
	}
	if _, err := s.GC(ctx); !errors.Is(err, ErrInvalidData) {
		t.Errorf("GC with corrupt pinned root: %v, want ErrInvalidData (and nothing deleted)", err)
	}
}

// hostileDir stores a directory whose entries have the given names, all
// pointing at one small file, and returns its root.
func hostileDir(t *testing.T, s *Store, names ...string) cid.Cid {
	t.Helper()
	ctx := context.Background()
	file := dag.NewRawNode([]byte("pwned\n"))
	dir := dag.NodeWithData(ft.FolderPBData())
	if err := dir.SetCidBuilder(cidPrefix()); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := dir.AddNodeLink(n, file); err != nil {
			t.Fatal(err)
		}
	}
	w := newDagWriter(ctx, s)
	for _, nd := range []ipld.Node{file, dir} {
		if err := w.Add(ctx, nd); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.close(); err != nil {
		t.Fatal(err)
	}
	return dir.Cid()
}

func TestExportRefusesHostileNames(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	for _, name := range []string{"../evil", "..", ".", "", "a/../../evil", "/etc/evil", "nul\x00", "new\nline", "esc\x1b[2J", "del\x7f"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			root := hostileDir(t, s, "fine", name)
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			err := s.Export(ctx, root, dest, ExportOptions{})
			if !errors.Is(err, ErrUnsafeName) {
				t.Fatalf("export: %v, want ErrUnsafeName", err)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
				t.Error("hostile DAG wrote outside the export directory")
			}
		})
	}
	root := hostileDir(t, s, "twin", "twin")
	if err := s.Export(ctx, root, filepath.Join(t.TempDir(), "out"), ExportOptions{}); err == nil {
		t.Error("export of duplicate names succeeded")
	}
}
