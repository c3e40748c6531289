package content

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

func symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

// checkpointTree builds a job output with links inside it, the kind a
// training run leaves, and links and special files that must not travel.
// It returns the names (relative, slash-separated) that Import must skip.
func checkpointTree(t *testing.T, dir string) []string {
	t.Helper()
	mkdir(t, dir, 0o755)
	mkdir(t, filepath.Join(dir, "ckpt", "epoch_10"), 0o755)
	mkdir(t, filepath.Join(dir, "logs", "run1"), 0o755)
	writeRandom(t, filepath.Join(dir, "epoch_09.pt"), chunkSize+5, 1, 0o644)
	writeRandom(t, filepath.Join(dir, "epoch_10.pt"), 3000, 2, 0o600)
	writeRandom(t, filepath.Join(dir, "ckpt", "epoch_10", "model.bin"), 4096, 3, 0o644)
	writeRandom(t, filepath.Join(dir, "logs", "run1", "events"), 100, 4, 0o644)
	// Inside: to a file, to a directory, up and back down, dangling.
	symlink(t, "epoch_10.pt", filepath.Join(dir, "latest.pt"))
	symlink(t, "ckpt/epoch_10", filepath.Join(dir, "latest"))
	symlink(t, "../../epoch_09.pt", filepath.Join(dir, "logs", "run1", "best.pt"))
	symlink(t, "./ckpt//epoch_10/./model.bin", filepath.Join(dir, "odd-but-inside"))
	symlink(t, "not-written-yet", filepath.Join(dir, "dangling"))
	symlink(t, "..", filepath.Join(dir, "logs", "up"))
	// Outside: absolute, climbing, the root of the file system, and a ".."
	// after a name (which a link named there could send anywhere).
	symlink(t, "/etc/passwd", filepath.Join(dir, "passwd"))
	symlink(t, "../../etc/passwd", filepath.Join(dir, "climb"))
	symlink(t, "../../../../etc", filepath.Join(dir, "logs", "run1", "etc"))
	symlink(t, "/", filepath.Join(dir, "root"))
	symlink(t, "latest/../../x", filepath.Join(dir, "through-link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "logs", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"climb", "logs/pipe", "logs/run1/etc", "passwd", "root", "through-link"}
}

func TestImportExportKeepsInsideLinks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	src := filepath.Join(t.TempDir(), "out")
	wantSkipped := checkpointTree(t, src)

	var skipped []string
	root, n, err := s.Import(ctx, src, ImportOptions{
		SkipUnsupported: true,
		OnSkip: func(p, reason string) {
			if reason == "" {
				t.Errorf("%s skipped without a reason", p)
			}
			skipped = append(skipped, p)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(chunkSize + 5 + 3000 + 4096 + 100); n != want {
		t.Errorf("imported %d bytes, want %d", n, want)
	}
	slices.Sort(skipped)
	if !slices.Equal(skipped, wantSkipped) {
		t.Errorf("skipped %q, want %q", skipped, wantSkipped)
	}

	dest := filepath.Join(t.TempDir(), "got")
	if err := s.Export(ctx, root, dest, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range wantSkipped {
		if err := os.Remove(filepath.Join(src, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
	sameTree(t, src, dest)
	sameLinks(t, src, dest)
	// An inside link works as a link at the destination.
	a, err := os.ReadFile(filepath.Join(dest, "latest.pt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "epoch_10.pt"))
	if err != nil || string(a) != string(b) {
		t.Errorf("latest.pt does not read as epoch_10.pt (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(dest, "latest", "model.bin")); err != nil || fi.Size() != 4096 {
		t.Errorf("latest/model.bin through the directory link: %v", err)
	}

	// The same tree gives the same root: link targets are content.
	again, _, err := s.Import(ctx, dest, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again != root {
		t.Errorf("re-import gives %s, want %s", again, root)
	}
}

// sameLinks checks that every symlink in want is one in got with the same
// target.
func sameLinks(t *testing.T, want, got string) {
	t.Helper()
	links := 0
	err := filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return err
		}
		links++
		rel, _ := filepath.Rel(want, p)
		wt, err := os.Readlink(p)
		if err != nil {
			return err
		}
		gt, err := os.Readlink(filepath.Join(got, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if gt != wt {
			t.Errorf("%s -> %q, want %q", rel, gt, wt)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links == 0 {
		t.Fatal("no links compared")
	}
}

func TestImportWithoutSkipRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string)
		want string
	}{
		{"absolute link", func(t *testing.T, dir string) { symlink(t, "/etc/passwd", filepath.Join(dir, "l")) }, "outside the tree"},
		{"climbing link", func(t *testing.T, dir string) { symlink(t, "../x", filepath.Join(dir, "l")) }, "outside the tree"},
		{"link to root", func(t *testing.T, dir string) { symlink(t, "/", filepath.Join(dir, "l")) }, "outside the tree"},
		{"fifo", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "p"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			src := filepath.Join(t.TempDir(), "in")
			mkdir(t, src, 0o755)
			writeRandom(t, filepath.Join(src, "f"), 10, 1, 0o644)
			symlink(t, "f", filepath.Join(src, "inside"))
			tc.make(t, src)
			_, _, err := s.Import(ctx, src, ImportOptions{})
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("import: %v, want ErrUnsupported saying %q", err, tc.want)
			}
			if n := countBlocks(t, s); n != 0 {
				t.Errorf("refused import left %d blocks", n)
			}
		})
	}
}

func TestImportRefusesLinkRoot(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "real"), 0o755)
	symlink(t, "real", filepath.Join(dir, "link"))
	for _, o := range []ImportOptions{{}, {SkipUnsupported: true}} {
		if _, _, err := s.Import(ctx, filepath.Join(dir, "link"), o); !errors.Is(err, ErrUnsupported) {
			t.Errorf("import of a link root (skip %v): %v, want ErrUnsupported", o.SkipUnsupported, err)
		}
	}
}

// hostileTree stores a directory holding a symlink name -> target and then
// a directory of the same name with a file "passwd" in it (links sort by
// name, so "inside" is written first): the shape that
// would write through the link if export followed it.
func hostileTree(t *testing.T, s *Store, name, target string) cid.Cid {
	t.Helper()
	ctx := context.Background()
	data, err := ft.SymlinkData(target)
	if err != nil {
		t.Fatal(err)
	}
	link := dag.NodeWithData(data)
	file := dag.NewRawNode([]byte("pwned\n"))
	sub := dag.NodeWithData(ft.FolderPBData())
	dir := dag.NodeWithData(ft.FolderPBData())
	for _, n := range []*dag.ProtoNode{link, sub, dir} {
		if err := n.SetCidBuilder(cidPrefix()); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.AddNodeLink("passwd", file); err != nil {
		t.Fatal(err)
	}
	if err := dir.AddNodeLink("inside", sub); err != nil {
		t.Fatal(err)
	}
	if err := dir.AddNodeLink(name, link); err != nil {
		t.Fatal(err)
	}
	if err := dir.AddNodeLink(name, sub); err != nil {
		t.Fatal(err)
	}
	w := newDagWriter(ctx, s)
	for _, nd := range []ipld.Node{file, link, sub, dir} {
		if err := w.Add(ctx, nd); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.close(); err != nil {
		t.Fatal(err)
	}
	return dir.Cid()
}

func TestExportNeverWritesThroughLinks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	victim := t.TempDir()
	for _, tc := range []struct {
		name, target string
		want         error
	}{
		{"absolute", victim, ErrUnsafeLink},
		{"root", "/", ErrUnsafeLink},
		{"climbing", "../victim", ErrUnsafeLink},
		{"through a name", "inside/../../victim", ErrUnsafeLink},
		// Inside targets are created, and the second entry of the name
		// then fails instead of writing through the link.
		{"inside", "inside", nil},
		{"self", ".", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hostileTree(t, s, "z", tc.target)
			parent := t.TempDir()
			mkdir(t, filepath.Join(parent, "victim"), 0o755)
			dest := filepath.Join(parent, "out")
			err := s.Export(ctx, root, dest, ExportOptions{})
			if err == nil {
				t.Fatal("export of a hostile DAG succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("export: %v, want %v", err, tc.want)
			}
			for _, dir := range []string{victim, filepath.Join(parent, "victim")} {
				if ents, _ := os.ReadDir(dir); len(ents) > 0 {
					t.Errorf("export wrote %s into %s", ents[0].Name(), dir)
				}
			}
			if _, err := os.Stat(filepath.Join(dest, "inside", "passwd")); err != nil {
				t.Errorf("entry before the link not written: %v", err)
			}
		})
	}
}

func TestExportRefusesLinkRoot(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	data, err := ft.SymlinkData("/etc")
	if err != nil {
		t.Fatal(err)
	}
	link := dag.NodeWithData(data)
	if err := link.SetCidBuilder(cidPrefix()); err != nil {
		t.Fatal(err)
	}
	w := newDagWriter(ctx, s)
	if err := w.Add(ctx, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.close(); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, link.Cid(), dest, ExportOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("export of a symlink root: %v, want ErrUnsupported", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		t.Error("export of a symlink root created something")
	}
}

func TestLinkInside(t *testing.T) {
	for _, tc := range []struct {
		rel, target string
		want        bool
	}{
		{"l", "f", true},
		{"l", "./f", true},
		{"l", "d/e/f", true},
		{"l", ".", true},
		{"l", "..", false},
		{"l", "../x", false},
		{"a/l", "..", true},
		{"a/l", "../x", true},
		{"a/l", "../../x", false},
		{"a/b/l", "../../x", true},
		{"a/b/l", "../../../x", false},
		{"l", "d/../f", false},
		{"a/l", "./../x", true},
		{"l", "/etc", false},
		{"l", "/", false},
		{"l", "", false},
		{"l", "f\x00", false},
		{"l", strings.Repeat("a", maxLinkTarget+1), false},
	} {
		if got := linkInside(tc.rel, tc.target); got != tc.want {
			t.Errorf("linkInside(%q, %q) = %v, want %v", tc.rel, tc.target, got, tc.want)
		}
	}
}

// FuzzLinkInside checks the one promise export relies on: a target judged
// inside never resolves, lexically, above the root or to an absolute path.
func FuzzLinkInside(f *testing.F) {
	for _, s := range [][2]string{
		{"l", "f"}, {"a/b/l", "../../x"}, {"a/l", "../../x"}, {"l", "/etc"},
		{"l", "d/../../f"}, {"a/l", "./.././x"}, {"l", "//x"}, {"a//b/l", "../../x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rel, target string) {
		if rel == "" || path.IsAbs(rel) {
			return
		}
		if !linkInside(rel, target) {
			return
		}
		resolved := path.Join(path.Dir(path.Clean(rel)), target)
		if resolved == ".." || strings.HasPrefix(resolved, "../") || path.IsAbs(resolved) {
			t.Fatalf("linkInside(%q, %q) but it resolves to %q", rel, target, resolved)
		}
		if strings.ContainsRune(target, 0) {
			t.Fatalf("linkInside accepted a NUL in %q", target)
		}
	})
}

// TestOutsideHint: a refused link out of the tree says what to import
// instead: the smallest folder holding its target too, unless only the
// file system's root does, and always a copy with links resolved.
func TestOutsideHint(t *testing.T) {
	for _, tc := range []struct {
		root, p, target string
		want            []string
		not             string
	}{
		// A Hugging Face cache: the snapshot links into the blobs beside it.
		{"/h/hub/models--bert/snapshots/abc", "/h/hub/models--bert/snapshots/abc/config.json", "../../blobs/1234",
			[]string{"(/h/hub/models--bert)", "cp -rL /h/hub/models--bert/snapshots/abc DIR"}, ""},
		{"/h/data", "/h/data/sub/l", "/h/other/f", []string{"(/h)", "cp -rL /h/data DIR"}, ""},
		{"/h/data", "/h/data/l", "/etc/passwd", []string{"cp -rL /h/data DIR"}, "holds the link's target"},
		{"/", "/l", "/nowhere/../x", []string{"cp -rL / DIR"}, "holds the link's target"},
	} {
		got := outsideHint(tc.root, tc.p, tc.target)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s -> %s in %s: %q does not say %q", tc.p, tc.target, tc.root, got, w)
			}
		}
		if tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("%s -> %s in %s: %q says %q", tc.p, tc.target, tc.root, got, tc.not)
		}
	}
	if got := outsideHint("/h", "/h/f", ""); got != "" {
		t.Errorf("not a link: %q", got)
	}
	// Import says it, for the cache as laid out on disk.
	hub := filepath.Join(t.TempDir(), "models--bert")
	mkdir(t, filepath.Join(hub, "blobs"), 0o755)
	mkdir(t, filepath.Join(hub, "snapshots", "abc"), 0o755)
	writeRandom(t, filepath.Join(hub, "blobs", "1234"), 10, 1, 0o644)
	symlink(t, "../../blobs/1234", filepath.Join(hub, "snapshots", "abc", "config.json"))
	s := openStore(t, t.TempDir())
	_, _, err := s.Import(context.Background(), filepath.Join(hub, "snapshots", "abc"), ImportOptions{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "import a folder that holds the link's target too ("+hub+")") {
		t.Fatalf("import of a cache snapshot: %v", err)
	}
}
