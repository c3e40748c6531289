package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	chunk "github.com/ipfs/boxo/chunker"
	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// This file holds the stream-based side of the store: building a tree from
// readers instead of from a directory on disk, and reading one file of a
// DAG back as a stream. Image import uses the first to move registry and
// archive blobs into the store without writing them to disk first, and the
// provider uses the second to unpack layers.

// TreeFile is one file of a tree built by ImportTree.
type TreeFile struct {
	// Path is slash-separated and relative, such as "blobs/sha256/ab12…";
	// the directories on the way are created.
	Path string
	// Size is the exact number of bytes Open's reader gives. A reader
	// that gives more or fewer fails the import, as a file that changes
	// during Import does.
	Size int64
	// Open returns the file's content. It is called once, when the file's
	// turn comes, and the reader is closed before the next file is opened.
	// An error from the reader (a digest check at EOF, say) fails the
	// import and nothing is pinned.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// ImportTree builds a UnixFS directory DAG from files given as streams and
// returns its root and the bytes of file content imported. Each file is
// chunked exactly as Import chunks a file on disk (mode 0644, directories
// 0755), so the same bytes give the same blocks whichever way they came in,
// and blocks already held are not written again. Entries are sorted by
// name, so the root depends only on the paths and contents.
//
// o.MaxBytes and o.Limits are checked against the sum of the Sizes, the
// files and folders the paths make and their nesting before anything is
// read, as Import checks them; o.Pin pins the root once the whole tree is
// written.
func (s *Store) ImportTree(ctx context.Context, files []TreeFile, o ImportOptions) (cid.Cid, int64, error) {
	t := tally{lim: o.limits()}
	tree, err := planTree(files, &t)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import tree: %w", err)
	}
	total := t.bytes
	progressStart(o.Progress, total, "import tree")
	defer progressDone(o.Progress)

	s.gcMu.RLock()
	defer s.gcMu.RUnlock()

	w := newDagWriter(ctx, s)
	imp := importer{dag: w, p: o.Progress}
	nd, err := imp.tree(ctx, tree)
	if _, _, cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import tree: %w", err)
	}
	root := nd.Cid()
	sc, err := s.scan(ctx, root)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import tree: %w", err)
	}
	if len(sc.missing) > 0 {
		return cid.Undef, 0, fmt.Errorf("import tree: %w after writing", ErrIncomplete)
	}
	if err := s.commit(root, sc.held, o.Pin); err != nil {
		return cid.Undef, 0, fmt.Errorf("import tree: %w", err)
	}
	return root, imp.read, nil
}

// treeDir is a directory of a tree being planned: subdirectories and files
// by name.
type treeDir struct {
	dirs  map[string]*treeDir
	files map[string]TreeFile
}

func newTreeDir() *treeDir {
	return &treeDir{dirs: map[string]*treeDir{}, files: map[string]TreeFile{}}
}

// planTree checks every path and arranges the files into directories, so
// that a bad path or a tree over t's caps fails before any block is
// written. t counts the files, the folders they make and the bytes.
func planTree(files []TreeFile, t *tally) (*treeDir, error) {
	root := newTreeDir()
	for _, f := range files {
		if f.Size < 0 || f.Open == nil {
			return nil, fmt.Errorf("file %q: needs a size and an Open function", f.Path)
		}
		parts := strings.Split(f.Path, "/")
		for _, p := range parts {
			if err := checkName(".", p); err != nil {
				return nil, err
			}
		}
		// importer.tree recurses once per folder level.
		if err := t.checkDepth(len(parts) - 1); err != nil {
			return nil, fmt.Errorf("%q: %w", f.Path, err)
		}
		d := root
		for _, p := range parts[:len(parts)-1] {
			if _, ok := d.files[p]; ok {
				return nil, fmt.Errorf("%q is both a file and a directory", f.Path)
			}
			next, ok := d.dirs[p]
			if !ok {
				if err := t.addEntries(1); err != nil {
					return nil, err
				}
				next = newTreeDir()
				d.dirs[p] = next
			}
			d = next
		}
		name := parts[len(parts)-1]
		if _, ok := d.files[name]; ok {
			return nil, fmt.Errorf("%q is given twice", f.Path)
		}
		if _, ok := d.dirs[name]; ok {
			return nil, fmt.Errorf("%q is both a file and a directory", f.Path)
		}
		if err := t.addEntries(1); err != nil {
			return nil, err
		}
		if err := t.addBytes(f.Size); err != nil {
			return nil, err
		}
		d.files[name] = f
	}
	return root, nil
}

func (imp *importer) tree(ctx context.Context, t *treeDir) (ipld.Node, error) {
	d, err := uio.NewDirectory(imp.dag,
		uio.WithCidBuilder(cidPrefix()),
		uio.WithMaxHAMTFanout(hamtFanout),
		uio.WithSizeEstimationMode(uio.SizeEstimationBlock),
	)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(t.dirs)+len(t.files))
	for n := range t.dirs {
		names = append(names, n)
	}
	for n := range t.files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var child ipld.Node
		if sub, ok := t.dirs[name]; ok {
			child, err = imp.tree(ctx, sub)
		} else {
			child, err = imp.stream(ctx, t.files[name])
		}
		if err != nil {
			return nil, err
		}
		if err := d.AddChild(ctx, name, child); err != nil {
			return nil, fmt.Errorf("add %s: %w", name, err)
		}
	}
	nd, err := d.GetNode()
	if err != nil {
		return nil, err
	}
	return nd, imp.dag.Add(ctx, nd)
}

// stream imports one TreeFile with the same layout as importer.file.
func (imp *importer) stream(ctx context.Context, f TreeFile) (nd ipld.Node, err error) {
	rc, err := f.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.Path, err)
	}
	defer func() {
		if cerr := rc.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", f.Path, cerr)
		}
	}()
	r := &fileReader{ctx: ctx, r: rc, path: f.Path, want: f.Size, p: imp.p}
	if f.Size == 0 {
		// Read anyway, so that a reader that checks at EOF gets to check.
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, fmt.Errorf("read %s: %w", f.Path, err)
		}
		return imp.emptyFile(ctx, defaultFileMode)
	}
	params := helpers.DagBuilderParams{
		Maxlinks:   fileDAGWidth,
		RawLeaves:  true,
		CidBuilder: cidPrefix(),
		Dagserv:    imp.dag,
	}
	db, err := params.New(chunk.NewSizeSplitter(r, chunkSize))
	if err != nil {
		return nil, err
	}
	nd, err = balanced.Layout(db)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	if r.got != r.want {
		return nil, fmt.Errorf("%s gave %d bytes, want %d", f.Path, r.got, r.want)
	}
	imp.read += r.got
	return nd, nil
}

// Open returns a reader over the UnixFS file DAG under c, which may be a
// file inside a directory DAG (see Resolve). Every block is hashed as it is
// read, so damaged blocks surface as ErrInvalidData from Read. Blocks
// absent from the store fail the read with ErrNotFound: fetch the DAG
// first.
func (s *Store) Open(ctx context.Context, c cid.Cid) (io.ReadSeekCloser, error) {
	if err := checkCid(c); err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	}
	nd, err := s.node(c)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	}
	if kind, _, _, err := inspect(nd); err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	} else if kind != kindFile {
		return nil, fmt.Errorf("open %s: %w: not a file", c, ErrUnsupported)
	}
	r, err := uio.NewDagReader(ctx, nd, storeDAG{s})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	}
	return r, nil
}

// Resolve returns the CID of the entry at the slash-separated path p inside
// the directory DAG under root; "" or "." is root itself. A missing entry is
// ErrNotFound.
func (s *Store) Resolve(ctx context.Context, root cid.Cid, p string) (cid.Cid, error) {
	if err := checkCid(root); err != nil {
		return cid.Undef, fmt.Errorf("resolve %s/%s: %w", root, p, err)
	}
	c := root
	if p == "" || p == "." {
		return c, nil
	}
	for _, name := range strings.Split(path.Clean(p), "/") {
		if err := checkName(p, name); err != nil {
			return cid.Undef, err
		}
		nd, err := s.node(c)
		if err != nil {
			return cid.Undef, fmt.Errorf("resolve %s/%s: %w", root, p, err)
		}
		d, err := uio.NewDirectoryFromNode(storeDAG{s}, nd)
		if err != nil {
			return cid.Undef, fmt.Errorf("resolve %s/%s: %w: %s is not a directory", root, p, ErrNotFound, c)
		}
		child, err := d.Find(ctx, name)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, dag.ErrLinkNotFound) || ipld.IsNotFound(err) {
			return cid.Undef, fmt.Errorf("resolve %s/%s: %w", root, p, ErrNotFound)
		}
		if err != nil {
			return cid.Undef, fmt.Errorf("resolve %s/%s: %w", root, p, err)
		}
		c = child.Cid()
	}
	return c, nil
}

// Usage is what the whole store holds.
type Usage struct {
	Blocks int
	Bytes  int64
}

// Usage counts every block held, pinned or not, each once.
func (s *Store) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	err := s.scanSizes(ctx, func(_ []byte, n int, _ *packLoc) error {
		u.Blocks++
		u.Bytes += int64(n)
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("usage: %w", err)
	}
	return u, nil
}
