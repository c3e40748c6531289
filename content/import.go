package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	chunk "github.com/ipfs/boxo/chunker"
	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"
)

// The DAG layout. These are the values of the unixfs-v1-2025 profile
// (IPIP-499), passed to the importer explicitly instead of through
// UnixFS_v1_2025.ApplyGlobals, which would change them for the whole
// process.
const (
	// chunkSize is 1 MiB rather than the historical 256 KiB: a quarter of
	// the blocks means a quarter of the per-block costs (keys, hashes
	// calls, CAR sections, bitswap wants) at no loss, since jobs read
	// whole files. It stays under bitswap's 2 MiB block limit.
	chunkSize = 1 << 20
	// fileDAGWidth links per file node: a 1 GiB file is one root with
	// 1024 raw leaves.
	fileDAGWidth = 1024
	hamtFanout   = 256

	// UnixFS readers assume these modes when none is stored. Storing a
	// mode only when it differs keeps small 0644 files one raw block.
	defaultFileMode = 0o644
	defaultDirMode  = 0o755
)

// cidPrefix is the CID of every dag-pb node we make; raw leaves take the
// same prefix with the raw codec.
func cidPrefix() cid.Prefix {
	return cid.Prefix{Version: 1, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1}
}

// ImportOptions configures Import. The zero value imports without a cap
// and without a pin.
type ImportOptions struct {
	// MaxBytes caps the total size of the regular files; 0 means no cap.
	// It is checked before anything is written.
	MaxBytes int64
	// Pin, if not empty, is the reason the new DAG is pinned with. The pin
	// lands in the same critical section as the import, so GC cannot take
	// the DAG in between.
	Pin string
	// Progress receives the bytes of file content read.
	Progress Progress
}

// Import adds the file or directory at path as a UnixFS DAG and returns
// its root and the bytes of file content imported.
//
// Directories keep empty subdirectories, and files and directories keep
// their permission bits (executable bits included); modification times
// and owners are not kept, so the same tree always gives the same CID.
// Symlinks, devices, sockets and FIFOs are refused with ErrUnsupported: a
// link would point at whatever the path means on the other machine, and
// inputs must be self-contained.
func (s *Store) Import(ctx context.Context, path string, o ImportOptions) (cid.Cid, int64, error) {
	total, err := planImport(ctx, path)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import %s: %w", path, err)
	}
	if o.MaxBytes > 0 && total > o.MaxBytes {
		return cid.Undef, 0, fmt.Errorf("import %s: %w: %d bytes, over the cap of %d bytes", path, ErrTooLarge, total, o.MaxBytes)
	}

	progressStart(o.Progress, total, "import "+path)
	defer progressDone(o.Progress)

	s.gcMu.RLock()
	defer s.gcMu.RUnlock()

	w := newDagWriter(ctx, s)
	imp := importer{dag: w, p: o.Progress}
	fi, err := os.Lstat(path)
	var nd ipld.Node
	if err == nil {
		nd, err = imp.entry(ctx, path, fi)
	}
	if _, _, cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import %s: %w", path, err)
	}
	root := nd.Cid()
	sc, err := s.scan(ctx, root)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import %s: %w", path, err)
	}
	if len(sc.missing) > 0 {
		return cid.Undef, 0, fmt.Errorf("import %s: %w after writing", path, ErrIncomplete)
	}
	if err := s.commit(root, sc.held, o.Pin); err != nil {
		return cid.Undef, 0, fmt.Errorf("import %s: %w", path, err)
	}
	s.log.Debug("imported", "path", path, "root", root, "bytes", imp.read, "blocks", len(sc.held))
	return root, imp.read, nil
}

// planImport walks path without reading file contents, refusing what Import
// would refuse, and returns the total size of the regular files. Walking
// first lets a size cap or a bad entry fail before any block is written.
func planImport(ctx context.Context, path string) (int64, error) {
	var total int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := checkEntryType(p, fi); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	return total, err
}

func checkEntryType(path string, fi fs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsRegular(), m.IsDir():
		return nil
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink; copy the target in instead", ErrUnsupported, path)
	default:
		return fmt.Errorf("%w: %s is not a regular file or directory (%s)", ErrUnsupported, path, m.Type())
	}
}

type importer struct {
	dag  *dagWriter
	p    Progress
	read int64
}

func (imp *importer) entry(ctx context.Context, path string, fi fs.FileInfo) (ipld.Node, error) {
	if err := checkEntryType(path, fi); err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return imp.dir(ctx, path, fi)
	}
	return imp.file(ctx, path, fi)
}

func (imp *importer) dir(ctx context.Context, path string, fi fs.FileInfo) (ipld.Node, error) {
	ents, err := os.ReadDir(path) // sorted by name, so the CID is reproducible
	if err != nil {
		return nil, err
	}
	opts := []uio.DirectoryOption{
		uio.WithCidBuilder(cidPrefix()),
		uio.WithMaxHAMTFanout(hamtFanout),
		uio.WithSizeEstimationMode(uio.SizeEstimationBlock),
	}
	if m := fi.Mode().Perm(); m != defaultDirMode {
		opts = append(opts, uio.WithStat(m, time.Time{}))
	}
	d, err := uio.NewDirectory(imp.dag, opts...)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := filepath.Join(path, e.Name())
		cfi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		child, err := imp.entry(ctx, p, cfi)
		if err != nil {
			return nil, err
		}
		if err := d.AddChild(ctx, e.Name(), child); err != nil {
			return nil, fmt.Errorf("add %s: %w", p, err)
		}
	}
	nd, err := d.GetNode()
	if err != nil {
		return nil, err
	}
	return nd, imp.dag.Add(ctx, nd)
}

func (imp *importer) file(ctx context.Context, path string, fi fs.FileInfo) (ipld.Node, error) {
	mode := fi.Mode().Perm()
	if fi.Size() == 0 {
		return imp.emptyFile(ctx, mode)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &fileReader{ctx: ctx, r: f, path: path, want: fi.Size(), p: imp.p}
	params := helpers.DagBuilderParams{
		Maxlinks:   fileDAGWidth,
		RawLeaves:  true,
		CidBuilder: cidPrefix(),
		Dagserv:    imp.dag,
	}
	if mode != defaultFileMode {
		params.FileMode = mode
	}
	db, err := params.New(chunk.NewSizeSplitter(r, chunkSize))
	if err != nil {
		return nil, err
	}
	nd, err := balanced.Layout(db)
	if err != nil {
		return nil, err
	}
	if r.got != r.want {
		return nil, fmt.Errorf("%s changed while being imported (%d bytes, then %d)", path, r.want, r.got)
	}
	imp.read += r.got
	if raw, ok := nd.(*dag.RawNode); ok && mode != defaultFileMode {
		// A one-chunk file is a bare raw block, which has nowhere to
		// keep a mode; wrap it in a file node that does.
		return imp.wrapRaw(ctx, raw, mode)
	}
	return nd, nil
}

// emptyFile makes an empty file a dag-pb file node with no links. The
// importer would make it the zero-length raw block, which bitswap servers
// will not serve and which cannot hold a mode.
func (imp *importer) emptyFile(ctx context.Context, mode fs.FileMode) (ipld.Node, error) {
	fsn := ft.NewFSNode(ft.TFile)
	if mode != defaultFileMode {
		fsn.SetMode(mode)
	}
	data, err := fsn.GetBytes()
	if err != nil {
		return nil, err
	}
	pn := dag.NodeWithData(data)
	if err := pn.SetCidBuilder(cidPrefix()); err != nil {
		return nil, err
	}
	return pn, imp.dag.Add(ctx, pn)
}

func (imp *importer) wrapRaw(ctx context.Context, raw *dag.RawNode, mode fs.FileMode) (ipld.Node, error) {
	fsn := ft.NewFSNode(ft.TFile)
	fsn.AddBlockSize(uint64(len(raw.RawData())))
	fsn.SetMode(mode)
	data, err := fsn.GetBytes()
	if err != nil {
		return nil, err
	}
	pn := dag.NodeWithData(data)
	if err := pn.SetCidBuilder(cidPrefix()); err != nil {
		return nil, err
	}
	if err := pn.AddNodeLink("", raw); err != nil {
		return nil, err
	}
	return pn, imp.dag.Add(ctx, pn)
}

// fileReader counts what is read for progress and refuses to read past the
// size seen when planning, so a file growing during import cannot slip
// past the size cap.
type fileReader struct {
	ctx  context.Context
	r    io.Reader
	path string
	want int64
	got  int64
	p    Progress
}

func (r *fileReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(b)
	r.got += int64(n)
	progressAdd(r.p, int64(n))
	if r.got > r.want {
		return n, fmt.Errorf("%s grew while being imported (planned %d bytes)", r.path, r.want)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, err
	}
	return n, err
}
