package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
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
// on bytes or entries, with folders nested at most DepthCeiling deep, and
// without a pin.
type ImportOptions struct {
	// MaxBytes caps the total size of the regular files; 0 means no cap.
	// It is checked before anything is written. It is the same cap as
	// Limits.MaxBytes, kept for the callers that set only it: where both
	// are set, the smaller holds.
	MaxBytes int64
	// Limits caps the tree: its bytes, entries and folder nesting. See
	// Import.
	Limits Limits
	// Pin, if not empty, is the reason the new DAG is pinned with. The pin
	// lands in the same critical section as the import, so GC cannot take
	// the DAG in between.
	Pin string
	// Progress receives the bytes of file content read.
	Progress Progress
	// SkipUnsupported leaves out, instead of refusing the whole import,
	// every entry that cannot be stored as data: device nodes, FIFOs,
	// sockets, and symlinks whose target is outside the imported tree.
	// Outputs set it, since a job's output is worth keeping even when the
	// job left a socket or a link to a system file in it; inputs leave it
	// unset, so the submitter learns at once that a tree is not
	// self-contained.
	SkipUnsupported bool
	// OnSkip, if not nil, is told of every entry SkipUnsupported left
	// out: its path relative to the imported root (slash-separated) and
	// why.
	OnSkip func(path, reason string)
}

// Import adds the file or directory at path as a UnixFS DAG and returns
// its root and the bytes of file content imported.
//
// Directories keep empty subdirectories, and files and directories keep
// their permission bits (executable bits included); modification times
// and owners are not kept, so the same tree always gives the same CID.
//
// A symlink is stored as a UnixFS symlink node holding its target text;
// it is never followed, so what it points at is not read. Only links that
// stay inside the tree are kept (see linkInside): a link with an absolute
// target, or one whose ".." steps climb out of the root, would mean
// whatever that path holds on the other machine, and following it here
// would carry out a file of this one. Such a link, a device, a socket or a
// FIFO is refused with ErrUnsupported, or left out and reported when
// o.SkipUnsupported is set. The root itself must be a directory or a
// regular file, not a link.
//
// What is imported is often what a job left, and a job can leave a
// million empty files or FIFOs, a sparse file of 1 TiB that takes no disk,
// or folders nested thousands deep, each of which would cost the import
// time and memory without end. So Import walks the tree first, reading no
// file, and refuses it before writing a block if it passes o.Limits: a
// *LimitError wrapping ErrTooLarge that names the cap. Bytes are the files'
// apparent sizes, so a sparse file counts at the size it would be
// exported at; entries include those left out; folders nest at most
// DepthCeiling deep whatever the limits say. The same counts are kept
// while importing, so a tree that grows after the walk is refused too.
func (s *Store) Import(ctx context.Context, path string, o ImportOptions) (cid.Cid, int64, error) {
	lim := o.limits()
	total, err := planImport(ctx, path, o.SkipUnsupported, lim)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("import %s: %w", path, err)
	}

	progressStart(o.Progress, total, "import "+path)
	defer progressDone(o.Progress)

	s.gcMu.RLock()
	defer s.gcMu.RUnlock()

	w := newDagWriter(ctx, s)
	imp := importer{dag: w, p: o.Progress, root: path, skip: o.SkipUnsupported, onSkip: o.OnSkip, t: tally{lim: lim}}
	fi, err := os.Lstat(path)
	var nd ipld.Node
	if err == nil {
		nd, err = imp.entry(ctx, path, fi)
	}
	if err == nil && nd == nil {
		err = fmt.Errorf("%w: %s is neither a file nor a directory", ErrUnsupported, path)
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

// limits is o.Limits with o.MaxBytes folded in.
func (o ImportOptions) limits() Limits {
	l := o.Limits
	if o.MaxBytes > 0 && (l.MaxBytes <= 0 || o.MaxBytes < l.MaxBytes) {
		l.MaxBytes = o.MaxBytes
	}
	return l
}

// planImport walks path without reading file contents, refusing what Import
// would refuse, and returns the total size of the regular files. Walking
// first lets a cap or a bad entry fail before any block is written.
//
// The walk stops at the first entry over a cap, and it reads folders a
// batch of names at a time with a stack of its own, not with
// filepath.WalkDir, which reads each folder whole and recurses: a folder
// of a hundred million FIFOs then costs no more than the cap to refuse.
func planImport(ctx context.Context, root string, skip bool, lim Limits) (int64, error) {
	t := tally{lim: lim}
	check := func(p string, fi fs.FileInfo) error {
		if err := t.count(root, p, fi); err != nil {
			return err
		}
		c, err := classify(root, p, fi)
		if err != nil {
			return err
		}
		if c.skip != "" && !skip {
			return fmt.Errorf("%w: %s %s%s", ErrUnsupported, ShowPath(p), c.skip, outsideHint(root, p, c.outside))
		}
		return nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return 0, err
	}
	if err := check(root, fi); err != nil {
		return 0, err
	}
	dirs := []string{}
	if fi.IsDir() {
		dirs = append(dirs, root)
	}
	for len(dirs) > 0 {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		sub, err := planDir(ctx, d, check)
		if err != nil {
			return 0, err
		}
		dirs = append(dirs, sub...)
	}
	return t.bytes, nil
}

// planBatch is how many names planDir reads from a folder at once.
const planBatch = 256

// planDir checks every entry of folder d and returns its subfolders.
func planDir(ctx context.Context, d string, check func(p string, fi fs.FileInfo) error) ([]string, error) {
	f, err := os.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var sub []string
	for {
		ents, err := f.ReadDir(planBatch)
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p := filepath.Join(d, e.Name())
			fi, err := e.Info()
			if err != nil {
				return nil, err
			}
			if err := check(p, fi); err != nil {
				return nil, err
			}
			if fi.IsDir() {
				sub = append(sub, p)
			}
		}
		if errors.Is(err, io.EOF) {
			return sub, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// count counts the entry at p, inside root, against the limits: every
// entry but a root folder, the apparent size of a regular file, and the
// depth of a folder. Left-out entries count too, since walking them costs
// as much.
func (t *tally) count(root, p string, fi fs.FileInfo) error {
	if p == root {
		if fi.IsDir() {
			return nil
		}
	} else if fi.IsDir() {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if err := t.checkDepth(strings.Count(rel, string(filepath.Separator)) + 1); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := t.addEntries(1); err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return t.addBytes(fi.Size())
	}
	return nil
}

// entryClass is what Import does with one entry: store it (skip empty) or
// leave it out for the reason in skip.
type entryClass struct {
	skip    string
	target  string // a kept symlink's target
	outside string // a symlink's target outside the tree, left out
}

// classify decides the fate of the entry at p inside root. It fails only
// on what no option makes acceptable: a root that is a link, or a link
// that cannot be read.
func classify(root, p string, fi fs.FileInfo) (entryClass, error) {
	if p != root && hasControl(filepath.Base(p)) {
		return entryClass{skip: "has a control character (a newline, say) in its name"}, nil
	}
	switch m := fi.Mode(); {
	case m.IsRegular(), m.IsDir():
		return entryClass{}, nil
	case m&fs.ModeSymlink != 0:
		if p == root {
			return entryClass{}, fmt.Errorf("%w: %s is a symlink; name its target instead", ErrUnsupported, p)
		}
		target, err := os.Readlink(p)
		if err != nil {
			return entryClass{}, err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return entryClass{}, err
		}
		if !linkInside(filepath.ToSlash(rel), target) {
			return entryClass{skip: fmt.Sprintf("is a symlink to %q, outside the tree", target), outside: target}, nil
		}
		return entryClass{target: target}, nil
	default:
		return entryClass{skip: fmt.Sprintf("is not a regular file, directory or symlink (%s)", m.Type())}, nil
	}
}

// outsideHint says what to import instead of a tree holding a link, at p,
// to target outside it: the smallest folder holding the tree and the
// link's target, when that is not the file system's root (a Hugging Face
// cache's snapshot folder links into the model's blobs folder beside it),
// or a copy with links resolved. Empty when target is empty (not a link
// out of the tree).
func outsideHint(root, p, target string) string {
	if target == "" {
		return ""
	}
	copyHint := fmt.Sprintf("a copy of it with links resolved (cp -rL %s DIR)", root)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	holds := func(dir string) bool {
		rel, err := filepath.Rel(dir, target)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	common := filepath.Clean(root)
	for !holds(common) && common != filepath.Dir(common) {
		common = filepath.Dir(common)
	}
	if common == filepath.Dir(common) {
		return "; a job sees only what the folder holds: import " + copyHint
	}
	return fmt.Sprintf("; a job sees only what the folder holds: import a folder that holds the link's target too (%s), or %s", common, copyHint)
}

// maxLinkTarget is the longest symlink target Linux accepts (PATH_MAX less
// the NUL).
const maxLinkTarget = 4095

// linkInside reports whether a symlink at rel (slash-separated, relative to
// the tree's root) with the given target resolves inside the tree. The
// target must be relative, and its ".." steps must all come first and
// climb no higher than the root. ".." after a name is refused outright:
// the name may itself be a symlink, and the kernel resolves "name/.." from
// where that link leads, not from where it sits, so a lexical check could
// not vouch for it.
func linkInside(rel, target string) bool {
	if target == "" || len(target) > maxLinkTarget || strings.ContainsRune(target, 0) || path.IsAbs(target) {
		return false
	}
	depth := 0
	if dir := path.Dir(path.Clean(rel)); dir != "." {
		if dir == ".." || strings.HasPrefix(dir, "../") || path.IsAbs(dir) {
			return false
		}
		depth = strings.Count(dir, "/") + 1
	}
	named := false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return false
			}
			if depth--; depth < 0 {
				return false
			}
		default:
			named = true
		}
	}
	return true
}

type importer struct {
	dag    *dagWriter
	p      Progress
	read   int64
	root   string
	skip   bool
	onSkip func(path, reason string)
	// t counts the tree again as it is imported, against the caps
	// planImport checked: what holds if the tree grows in between.
	t tally
}

// entry stores the entry at path and returns its node, or nil when the
// entry is left out.
func (imp *importer) entry(ctx context.Context, path string, fi fs.FileInfo) (ipld.Node, error) {
	if err := imp.t.count(imp.root, path, fi); err != nil {
		return nil, err
	}
	c, err := classify(imp.root, path, fi)
	if err != nil {
		return nil, err
	}
	if c.skip != "" {
		if !imp.skip {
			return nil, fmt.Errorf("%w: %s %s", ErrUnsupported, ShowPath(path), c.skip)
		}
		if imp.onSkip != nil {
			rel, _ := filepath.Rel(imp.root, path)
			imp.onSkip(filepath.ToSlash(rel), c.skip)
		}
		return nil, nil
	}
	switch {
	case fi.IsDir():
		return imp.dir(ctx, path, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		return imp.symlink(ctx, c.target)
	}
	return imp.file(ctx, path, fi)
}

// symlink stores a link's target text as a UnixFS symlink node. Links
// carry no mode: Linux ignores a symlink's permission bits.
func (imp *importer) symlink(ctx context.Context, target string) (ipld.Node, error) {
	pn, err := protoNode(ft.SymlinkData(target))
	if err != nil {
		return nil, err
	}
	return pn, imp.dag.Add(ctx, pn)
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
		if child == nil {
			continue
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
	pn, err := protoNode(fsn.GetBytes())
	if err != nil {
		return nil, err
	}
	return pn, imp.dag.Add(ctx, pn)
}

func (imp *importer) wrapRaw(ctx context.Context, raw *dag.RawNode, mode fs.FileMode) (ipld.Node, error) {
	fsn := ft.NewFSNode(ft.TFile)
	fsn.AddBlockSize(uint64(len(raw.RawData())))
	fsn.SetMode(mode)
	pn, err := protoNode(fsn.GetBytes())
	if err != nil {
		return nil, err
	}
	if err := pn.AddNodeLink("", raw); err != nil {
		return nil, err
	}
	return pn, imp.dag.Add(ctx, pn)
}

// protoNode is a dag-pb node holding data, with this importer's CIDs; err
// is the error of encoding data, returned as it is.
func protoNode(data []byte, err error) (*dag.ProtoNode, error) {
	if err != nil {
		return nil, err
	}
	pn := dag.NodeWithData(data)
	if err := pn.SetCidBuilder(cidPrefix()); err != nil {
		return nil, err
	}
	return pn, nil
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
