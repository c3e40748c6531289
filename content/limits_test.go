package content

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// wantLimit fails unless err is a *LimitError on limit that wraps
// ErrTooLarge.
func wantLimit(tb testing.TB, err error, limit string) *LimitError {
	tb.Helper()
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrTooLarge) {
		tb.Fatalf("err = %v, want a *LimitError on %s wrapping ErrTooLarge", err, limit)
	}
	if le.Limit != limit {
		tb.Fatalf("err = %v: limit %q, want %q", err, le.Limit, limit)
	}
	return le
}

// nothingKept fails if s holds a block or a pin.
func nothingKept(tb testing.TB, s *Store) {
	tb.Helper()
	if n := countBlocks(tb, s); n != 0 {
		tb.Errorf("refused import left %d blocks", n)
	}
	pins, err := s.Pins(context.Background())
	if err != nil || len(pins) != 0 {
		tb.Errorf("pins after a refused import: %v, %v", pins, err)
	}
}

// putNodes writes nodes to s as they are.
func putNodes(tb testing.TB, s *Store, nds ...ipld.Node) {
	tb.Helper()
	ctx := context.Background()
	w := newDagWriter(ctx, s)
	for _, nd := range nds {
		if err := w.Add(ctx, nd); err != nil {
			tb.Fatal(err)
		}
	}
	if _, _, err := w.close(); err != nil {
		tb.Fatal(err)
	}
}

func pbNode(tb testing.TB, data []byte) *dag.ProtoNode {
	tb.Helper()
	nd := dag.NodeWithData(data)
	if err := nd.SetCidBuilder(cidPrefix()); err != nil {
		tb.Fatal(err)
	}
	return nd
}

// fileNode makes a UnixFS file node linking children, stating sizes for
// them and, if total is not negative, total instead of their sum.
func fileNode(tb testing.TB, children []ipld.Node, sizes []uint64, total int64) *dag.ProtoNode {
	tb.Helper()
	fsn := ft.NewFSNode(ft.TFile)
	for _, n := range sizes {
		fsn.AddBlockSize(n)
	}
	if total >= 0 {
		fsn.UpdateFilesize(total - int64(fsn.FileSize()))
	}
	data, err := fsn.GetBytes()
	if err != nil {
		tb.Fatal(err)
	}
	nd := pbNode(tb, data)
	for _, c := range children {
		if err := nd.AddNodeLink("", c); err != nil {
			tb.Fatal(err)
		}
	}
	return nd
}

// dirNode makes a plain UnixFS directory of the given entries.
func dirNode(tb testing.TB, names []string, children []ipld.Node) *dag.ProtoNode {
	tb.Helper()
	nd := pbNode(tb, ft.FolderPBData())
	for i, name := range names {
		if err := nd.AddNodeLink(name, children[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return nd
}

// emptyDir reports whether dest does not exist or is an empty directory.
func emptyDest(tb testing.TB, dest string) {
	tb.Helper()
	ents, err := os.ReadDir(dest)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		if _, serr := os.Lstat(dest); serr == nil {
			tb.Errorf("refused export created %s", dest)
		}
		return
	}
	if len(ents) > 0 {
		tb.Errorf("refused export wrote %s into %s", ents[0].Name(), dest)
	}
}

// shallowStack lowers the goroutine stack cap for one test, so that a walk
// that recursed once per level of a deep DAG would crash the test instead
// of passing on Go's 1 GB default.
func shallowStack(tb testing.TB) {
	old := debug.SetMaxStack(1 << 20)
	tb.Cleanup(func() { debug.SetMaxStack(old) })
}

func TestLimitErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		e    LimitError
		want string
	}{
		{LimitError{"entries", 1000000, 1000001}, "content: too large: 1000001 entries, over the cap of 1000000 entries"},
		{LimitError{"bytes", 10 << 30, 1 << 40}, "content: too large: 1 TiB of files, over the cap of 10 GiB"},
		{LimitError{"bytes", 10 << 30, 3<<39 + 1}, "content: too large: 1.5 TiB of files, over the cap of 10 GiB"},
		{LimitError{"bytes", 1 << 20, 1<<20 + 1}, "content: too large: 1048577 bytes of files, over the cap of 1048576 bytes"},
		{LimitError{"bytes", 100, 512}, "content: too large: 512 bytes of files, over the cap of 100 bytes"},
		{LimitError{"depth", 256, 257}, "content: too large: folders nested deeper than 256"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
		if !errors.Is(&tc.e, ErrTooLarge) {
			t.Errorf("%+v does not wrap ErrTooLarge", tc.e)
		}
	}
}

// TestImportLimits: a job's output that would cost without bound is
// refused by the walk, before a block is written or anything pinned.
func TestImportLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, dir string)
		o     ImportOptions
		limit string // "" to succeed
	}{
		{
			name: "entries",
			build: func(t *testing.T, dir string) {
				for i := range 150 {
					writeRandom(t, filepath.Join(dir, fmt.Sprintf("f%03d", i)), 0, 0, 0o644)
				}
			},
			o:     ImportOptions{Limits: Limits{MaxEntries: 100}},
			limit: "entries",
		},
		{
			name: "entries within the cap",
			build: func(t *testing.T, dir string) {
				mkdir(t, filepath.Join(dir, "d"), 0o755)
				for i := range 99 {
					writeRandom(t, filepath.Join(dir, "d", fmt.Sprintf("f%03d", i)), 0, 0, 0o644)
				}
			},
			o: ImportOptions{Limits: Limits{MaxEntries: 100}},
		},
		{
			name:  "sparse file",
			build: func(t *testing.T, dir string) { sparse(t, filepath.Join(dir, "sparse"), 1<<40) },
			o:     ImportOptions{Limits: Limits{MaxBytes: 10 << 30}},
			limit: "bytes",
		},
		{
			name:  "sparse file, the older MaxBytes",
			build: func(t *testing.T, dir string) { sparse(t, filepath.Join(dir, "sparse"), 1<<40) },
			o:     ImportOptions{MaxBytes: 10 << 30},
			limit: "bytes",
		},
		{
			name:  "the smaller of the two byte caps",
			build: func(t *testing.T, dir string) { writeRandom(t, filepath.Join(dir, "f"), 2000, 1, 0o644) },
			o:     ImportOptions{MaxBytes: 1000, Limits: Limits{MaxBytes: 1 << 20}},
			limit: "bytes",
		},
		{
			name:  "nesting",
			build: func(t *testing.T, dir string) { nest(t, dir, 40) },
			o:     ImportOptions{Limits: Limits{MaxDepth: 16}},
			limit: "depth",
		},
		{
			name:  "nesting at the cap",
			build: func(t *testing.T, dir string) { nest(t, dir, 16) },
			o:     ImportOptions{Limits: Limits{MaxDepth: 16}},
		},
		{
			name: "fifos left out",
			build: func(t *testing.T, dir string) {
				for i := range 1000 {
					if err := syscall.Mkfifo(filepath.Join(dir, fmt.Sprintf("fifo%04d", i)), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			},
			o:     ImportOptions{SkipUnsupported: true, Limits: Limits{MaxEntries: 100}},
			limit: "entries",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			dir := filepath.Join(t.TempDir(), "out")
			mkdir(t, dir, 0o755)
			tc.build(t, dir)
			o := tc.o
			o.Pin = "output"
			_, _, err := s.Import(ctx, dir, o)
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("import within the caps: %v", err)
				}
				return
			}
			le := wantLimit(t, err, tc.limit)
			if le.Got <= le.Cap {
				t.Errorf("%v: got %d is not over cap %d", err, le.Got, le.Cap)
			}
			nothingKept(t, s)
		})
	}
}

// sparse makes a file of apparent size n that takes almost no disk.
func sparse(tb testing.TB, p string, n int64) {
	tb.Helper()
	writeRandom(tb, p, 0, 0, 0o644)
	if err := os.Truncate(p, n); err != nil {
		tb.Skipf("cannot make a sparse file of %d bytes here: %v", n, err)
	}
}

// nest makes folders n deep under dir, with a file at the bottom.
func nest(tb testing.TB, dir string, n int) {
	tb.Helper()
	p := dir
	for range n {
		p = filepath.Join(p, "d")
	}
	mkdir(tb, p, 0o755)
	writeRandom(tb, filepath.Join(p, "f"), 10, 1, 0o644)
}

// TestImportTreeLimits: a tree built from streams is held to the same
// caps.
func TestImportTreeLimits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	deep := strings.Repeat("d/", 20) + "f"
	for _, tc := range []struct {
		files []TreeFile
		lim   Limits
		limit string
	}{
		{[]TreeFile{bytesFile("a/x", nil), bytesFile("a/y", nil), bytesFile("b", nil)}, Limits{MaxEntries: 3}, "entries"},
		{[]TreeFile{bytesFile("a", make([]byte, 10))}, Limits{MaxBytes: 9}, "bytes"},
		{[]TreeFile{bytesFile(deep, nil)}, Limits{MaxDepth: 19}, "depth"},
	} {
		_, _, err := s.ImportTree(ctx, tc.files, ImportOptions{Pin: "p", Limits: tc.lim})
		wantLimit(t, err, tc.limit)
	}
	nothingKept(t, s)
	if _, _, err := s.ImportTree(ctx, []TreeFile{bytesFile(deep, nil)}, ImportOptions{Limits: Limits{MaxDepth: 20, MaxEntries: 21}}); err != nil {
		t.Fatalf("tree at the caps: %v", err)
	}
}

// TestExportLimits: DAGs of a few blocks that describe far more than they
// hold are refused before anything is written.
func TestExportLimits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	shallowStack(t)

	// One zero block of a chunk, linked 1024 times by a node of 1 GiB
	// that is linked 1024 times by the root: 1 TiB in 3 blocks.
	zero := dag.NewRawNode(make([]byte, chunkSize))
	gib := fileNode(t, repeat[ipld.Node](zero, 1024), repeat[uint64](chunkSize, 1024), -1)
	tib := fileNode(t, repeat[ipld.Node](gib, 1024), repeat[uint64](1<<30, 1024), -1)
	putNodes(t, s, zero, gib, tib)
	inDir := dirNode(t, []string{"big"}, []ipld.Node{tib})
	putNodes(t, s, inDir)

	// A million entries and more in three blocks: 1000 folders that are
	// one folder of 1000 empty files.
	empty := pbNode(t, mustBytes(t, ft.NewFSNode(ft.TFile)))
	leafDir := dirNode(t, names("f", 1000), repeat[ipld.Node](empty, 1000))
	million := dirNode(t, names("d", 1000), repeat[ipld.Node](leafDir, 1000))
	putNodes(t, s, empty, leafDir, million)

	// Folders nested 10,000 deep, built bottom-up.
	deep := []ipld.Node{dirNode(t, nil, nil)}
	for range 10000 {
		deep = append(deep, dirNode(t, []string{"d"}, deep[len(deep)-1:]))
	}
	putNodes(t, s, deep...)
	deepRoot := deep[len(deep)-1].Cid()

	// A file DAG nested 100,000 levels deep, each level honest about
	// its one byte.
	chain := []ipld.Node{dag.NewRawNode([]byte{'x'})}
	for range 100000 {
		chain = append(chain, fileNode(t, chain[len(chain)-1:], []uint64{1}, -1))
	}
	putNodes(t, s, chain...)
	// And one a real layout could have, 60 levels.
	putNodes(t, s, chain[:61]...)

	for _, tc := range []struct {
		name  string
		root  cid.Cid
		lim   Limits
		limit string // the cap hit
		err   error  // or the error, when not a cap
	}{
		{name: "1 TiB file of one block", root: tib.Cid(), lim: Limits{MaxBytes: 10 << 30}, limit: "bytes"},
		{name: "1 TiB file in a folder", root: inDir.Cid(), lim: Limits{MaxBytes: 10 << 30}, limit: "bytes"},
		{name: "a million entries", root: million.Cid(), lim: Limits{MaxEntries: 1000000}, limit: "entries"},
		{name: "folders 10,000 deep, no caps set", root: deepRoot, limit: "depth"},
		{name: "folders 10,000 deep", root: deepRoot, lim: Limits{MaxDepth: 256}, limit: "depth"},
		{name: "file DAG 100,000 levels deep", root: chain[len(chain)-1].Cid(), err: ErrInvalidData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "out")
			err := s.Export(ctx, tc.root, dest, ExportOptions{Limits: tc.lim})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("export: %v, want %v", err, tc.err)
				}
			} else {
				le := wantLimit(t, err, tc.limit)
				if tc.lim == (Limits{}) && le.Cap != DepthCeiling {
					t.Errorf("cap %d with no limits set, want DepthCeiling %d", le.Cap, DepthCeiling)
				}
			}
			emptyDest(t, dest)
		})
	}

	// Within the caps, the same DAGs export.
	dest := filepath.Join(t.TempDir(), "sixty")
	if err := s.Export(ctx, chain[60].Cid(), dest, ExportOptions{}); err != nil {
		t.Fatalf("file DAG 60 levels deep: %v", err)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != "x" {
		t.Errorf("file DAG 60 levels deep exported as %q, %v", b, err)
	}
	if err := s.Export(ctx, deep[200].Cid(), filepath.Join(t.TempDir(), "deep"), ExportOptions{Limits: Limits{MaxDepth: 200}}); err != nil {
		t.Errorf("folders 200 deep at a cap of 200: %v", err)
	}
	if err := s.Export(ctx, deep[201].Cid(), filepath.Join(t.TempDir(), "deep"), ExportOptions{Limits: Limits{MaxDepth: 200}}); err == nil {
		t.Errorf("folders 201 deep at a cap of 200 exported")
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

func mustBytes(tb testing.TB, fsn *ft.FSNode) []byte {
	tb.Helper()
	b, err := fsn.GetBytes()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestExportRefusesLyingSizes: a file whose UnixFS sizes do not add up to
// what its leaves hold is refused before a byte of it is written, whether
// it claims more or fewer bytes than it holds; its claim is never what
// Export trusts.
func TestExportRefusesLyingSizes(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	mib := dag.NewRawNode(randomBytes(chunkSize, 1))
	small := dag.NewRawNode([]byte("ten bytes!"))
	putNodes(t, s, mib, small)
	both := []ipld.Node{mib, small}
	honest := []uint64{chunkSize, 10}
	for _, tc := range []struct {
		name     string
		children []ipld.Node
		sizes    []uint64
		total    int64
	}{
		{"claims more than its leaves", both, []uint64{chunkSize, chunkSize}, -1},
		{"claims fewer than its leaves", both, []uint64{1, 1}, -1},
		{"total over its parts", both, honest, 1 << 40},
		{"total under its parts", both, honest, 5},
		{"a size for a link it lacks", []ipld.Node{mib}, honest, -1},
		{"a link without a size", both, []uint64{chunkSize}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nd := fileNode(t, tc.children, tc.sizes, tc.total)
			putNodes(t, s, nd)
			for _, root := range []ipld.Node{nd, dirNode(t, []string{"first", "liar"}, []ipld.Node{small, nd})} {
				putNodes(t, s, root)
				dest := filepath.Join(t.TempDir(), "out")
				err := s.Export(ctx, root.Cid(), dest, ExportOptions{Limits: Limits{MaxBytes: 10 << 30}})
				if !errors.Is(err, ErrInvalidData) {
					t.Fatalf("export: %v, want ErrInvalidData", err)
				}
				emptyDest(t, dest)
			}
		})
	}
	// The same blocks with honest sizes export as they are.
	nd := fileNode(t, both, honest, -1)
	putNodes(t, s, nd)
	dest := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, nd.Cid(), dest, ExportOptions{Limits: Limits{MaxBytes: chunkSize + 10}}); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, mib.RawData()...), small.RawData()...)
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, want) {
		t.Errorf("honest file exported as %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// TestLimitsAtTheFigures: a real tree imports and exports byte for byte
// with every cap at exactly its figures, and is refused, naming the cap,
// with any one of them a step lower.
func TestLimitsAtTheFigures(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 1)
	var bytes int64
	entries, depth := 0, 0
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == src {
			return err
		}
		entries++
		if fi.Mode().IsRegular() {
			bytes += fi.Size()
		}
		if fi.IsDir() {
			rel, _ := filepath.Rel(src, p)
			depth = max(depth, strings.Count(rel, "/")+1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	exact := Limits{MaxBytes: bytes, MaxEntries: entries, MaxDepth: depth}
	root, _, err := s.Import(ctx, src, ImportOptions{Pin: "in", Limits: exact})
	if err != nil {
		t.Fatalf("import at the caps: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, root, out, ExportOptions{Limits: exact}); err != nil {
		t.Fatalf("export at the caps: %v", err)
	}
	sameTree(t, src, out)

	for _, tc := range []struct {
		limit string
		lim   Limits
	}{
		{"bytes", Limits{MaxBytes: bytes - 1, MaxEntries: entries, MaxDepth: depth}},
		{"entries", Limits{MaxBytes: bytes, MaxEntries: entries - 1, MaxDepth: depth}},
		{"depth", Limits{MaxBytes: bytes, MaxEntries: entries, MaxDepth: depth - 1}},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			_, _, err := s.Import(ctx, src, ImportOptions{Limits: tc.lim})
			wantLimit(t, err, tc.limit)
			dest := filepath.Join(t.TempDir(), "out")
			err = s.Export(ctx, root, dest, ExportOptions{Limits: tc.lim})
			wantLimit(t, err, tc.limit)
			emptyDest(t, dest)
		})
	}
}

// TestExportShardedDirectory: a HAMT-sharded directory is listed in
// boxo's order with boxo's names, exports whole, and counts against the
// entry cap.
func TestExportShardedDirectory(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	// Long names, so that few entries pass the 256 KiB at which a
	// folder is sharded.
	const n = 2000
	long := strings.Repeat("long-name-", 10)
	var files []TreeFile
	for i := range n {
		files = append(files, bytesFile(fmt.Sprintf("many/%s%05d", long, i), []byte(fmt.Sprint(i))))
	}
	root, _, err := s.ImportTree(ctx, files, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	many, err := s.Resolve(ctx, root, "many")
	if err != nil {
		t.Fatal(err)
	}
	nd, err := s.node(many)
	if err != nil {
		t.Fatal(err)
	}
	fsn, err := ft.FSNodeFromBytes(nd.(*dag.ProtoNode).Data())
	if err != nil || fsn.Type() != ft.THAMTShard {
		t.Fatalf("a folder of %d files is not sharded (%v, %v): the test tests nothing", n, fsn.Type(), err)
	}

	d, err := uio.NewDirectoryFromNode(storeDAG{s}, nd)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := d.ForEachLink(ctx, func(l *ipld.Link) error {
		want = append(want, l.Name+" "+l.Cid.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	it, err := newDirIter(ctx, s, nd)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		name, c, ok, err := it.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, name+" "+c.String())
	}
	if len(got) != len(want) {
		t.Fatalf("dirIter listed %d entries, boxo %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: dirIter %q, boxo %q", i, got[i], want[i])
		}
	}

	out := filepath.Join(t.TempDir(), "out")
	if err := s.Export(ctx, root, out, ExportOptions{Limits: Limits{MaxEntries: n + 1}}); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(out, "many"))
	if err != nil || len(ents) != n {
		t.Fatalf("exported %d entries, %v; want %d", len(ents), err, n)
	}
	if b, err := os.ReadFile(filepath.Join(out, "many", long+"01234")); err != nil || string(b) != "1234" {
		t.Errorf("file 1234 holds %q, %v", b, err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	wantLimit(t, s.Export(ctx, root, dest, ExportOptions{Limits: Limits{MaxEntries: n}}), "entries")
	emptyDest(t, dest)
}
