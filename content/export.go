package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"strings"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// Export writes the DAG under root to dest: a directory DAG becomes the
// directory dest (created, or an existing empty one), a file DAG becomes the
// file dest (which must not exist). Contents are byte-identical to what was
// imported and permission bits are restored.
//
// The DAG may come from another machine, so every name in it is checked:
// "", ".", "..", and names with "/" or NUL are refused with ErrUnsafeName,
// and all writes go through an os.Root at dest, so nothing lands outside it
// whatever the DAG says. Duplicate names fail instead of overwriting. The
// whole DAG must be held; Export checks before writing anything.
//
// Symlink nodes become symlinks with the stored target, created and never
// followed: a later entry of the same DAG that names a path through the
// link fails (names cannot hold "/", a second entry of the same name
// fails, and os.Root refuses to leave dest through a link). A link whose
// target would leave dest (see linkInside) is refused with ErrUnsafeLink
// rather than created dangling, since Import never stores one and the DAG
// is therefore not ours. A DAG whose root is a symlink is refused with
// ErrUnsupported: its target would mean nothing at dest.
//
// A DAG of a few MB can describe a TiB of files (one zero block linked a
// million times), a million entries or folders nested without end, so
// before writing anything Export counts what the DAG would write, with a
// walk that needs no recursion, and refuses it if it passes o.Limits: a
// *LimitError wrapping ErrTooLarge that names the cap, or ErrInvalidData
// for a file DAG more than 64 levels deep (a real one of a PiB is 3).
// Folders are nested at most DepthCeiling deep whatever the limits say,
// since writing them takes one call per level. The count takes each
// distinct block once, so a DAG that repeats a subtree is refused in the
// time its blocks take to read.
//
// The byte count is of what the DAG holds, not of what it says: every file
// node's stated sizes are checked against its children first, and a file
// whose UnixFS sizes claim more or fewer bytes than its leaves hold is
// refused with ErrInvalidData before any of it is written. While writing,
// Export counts the bytes and entries it actually writes against the same
// caps, and no file may write more than its root node states. An export
// refused for its caps or its sizes writes nothing; one that fails while
// writing (an unsafe link, a full disk) may leave what it wrote.
func (s *Store) Export(ctx context.Context, root cid.Cid, dest string, o ExportOptions) error {
	sc, err := s.scan(ctx, root)
	if err != nil {
		return fmt.Errorf("export %s: %w", root, err)
	}
	if len(sc.missing) > 0 {
		return fmt.Errorf("export %s: %w: %d subtrees missing, first %s", root, ErrIncomplete, len(sc.missing), sc.missing[0])
	}
	if _, err := s.planExport(ctx, root, o.Limits); err != nil {
		return fmt.Errorf("export %s: %w", root, err)
	}
	p := o.Progress
	progressStart(p, sc.bytes, "export "+root.String())
	defer progressDone(p)
	e := exporter{s: s, p: p, t: tally{lim: o.Limits}}
	if err := e.export(ctx, root, dest); err != nil {
		return fmt.Errorf("export %s to %s: %w", root, dest, err)
	}
	return nil
}

// ExportOptions configures Export. The zero value exports without a cap on
// bytes or entries, and with folders nested at most DepthCeiling deep.
type ExportOptions struct {
	// Progress receives the bytes of the blocks written out.
	Progress Progress
	// Limits caps what the DAG may make Export write; see Export.
	Limits Limits
}

// ErrUnsafeLink means a DAG holds a symlink whose target is absolute or
// climbs out of the export directory.
var ErrUnsafeLink = errors.New("content: symlink in DAG points outside it")

type exporter struct {
	s *Store
	p Progress
	// t counts what has been written, against the caps the pre-pass
	// already checked: the second check is what holds if the pre-pass
	// and the writing ever disagree.
	t tally
}

type entryKind int

const (
	kindFile entryKind = iota
	kindDir
	kindSymlink
)

// inspect tells what a UnixFS node is, the permission bits to give it and,
// for a symlink, its target.
func inspect(nd ipld.Node) (entryKind, fs.FileMode, string, error) {
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		return kindFile, defaultFileMode, "", nil // a raw block is file content
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return 0, 0, "", fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, nd.Cid(), err)
	}
	perm := fsn.Mode().Perm()
	switch fsn.Type() {
	case ft.TFile, ft.TRaw:
		if perm == 0 {
			perm = defaultFileMode
		}
		return kindFile, perm, "", nil
	case ft.TDirectory, ft.THAMTShard:
		if perm == 0 {
			perm = defaultDirMode
		}
		return kindDir, perm, "", nil
	case ft.TSymlink:
		if len(pn.Links()) > 0 {
			return 0, 0, "", fmt.Errorf("%w: symlink node %s has links", ErrInvalidData, nd.Cid())
		}
		return kindSymlink, 0, string(fsn.Data()), nil
	default:
		return 0, 0, "", fmt.Errorf("%w: node %s is UnixFS type %s", ErrUnsupported, nd.Cid(), fsn.Type())
	}
}

func (e *exporter) export(ctx context.Context, root cid.Cid, dest string) error {
	nd, err := e.s.node(root)
	if err != nil {
		return err
	}
	kind, perm, _, err := inspect(nd)
	if err != nil {
		return err
	}
	if kind == kindSymlink {
		return fmt.Errorf("%w: the DAG's root is a symlink", ErrUnsupported)
	}
	if kind == kindFile {
		f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		return e.finishFile(ctx, f, nd, perm)
	}
	if err := prepareDir(dest); err != nil {
		return err
	}
	r, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := e.dir(ctx, r, ".", 0, nd); err != nil {
		return err
	}
	return os.Chmod(dest, perm)
}

// prepareDir creates dest, or accepts it if it is an empty directory, so
// an export never mixes with files already there.
func prepareDir(dest string) error {
	err := os.Mkdir(dest, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.Open(dest)
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s exists and is not a directory: %w", dest, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("%s exists and is not empty", dest)
	}
	return nil
}

func checkName(dir, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || hasControl(name) {
		return fmt.Errorf("%w: %q in %s", ErrUnsafeName, name, dir)
	}
	return nil
}

// ShowPath is p as a message shows it: quoted, escapes and all, when it
// holds a control character, else as it is.
func ShowPath(p string) string {
	if hasControl(p) {
		return strconv.Quote(p)
	}
	return p
}

// hasControl reports whether name holds a control character (a newline,
// an escape, DEL). Linux allows them, but a name that moves a terminal's
// cursor or splits a line in two makes every listing of the folder, a
// job's log or a script reading `ls`, say something else than it holds:
// no DAG carries one (Import leaves such an entry out, or refuses it).
func hasControl(name string) bool {
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// dir writes the entries of directory node nd, a folder depth levels below
// the export's root, into rel, inside r. It recurses once per folder level;
// the pre-pass has bounded the levels.
func (e *exporter) dir(ctx context.Context, r *os.Root, rel string, depth int, nd ipld.Node) error {
	it, err := newDirIter(ctx, e.s, nd)
	if err != nil {
		return fmt.Errorf("directory %s: %w", nd.Cid(), err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		lname, c, ok, err := it.next()
		if err != nil {
			return fmt.Errorf("directory %s: %w", nd.Cid(), err)
		}
		if !ok {
			return nil
		}
		if err := e.entry(ctx, r, rel, depth, lname, c); err != nil {
			return err
		}
	}
}

// entry writes the entry lname -> c of the folder rel, at depth.
func (e *exporter) entry(ctx context.Context, r *os.Root, rel string, depth int, lname string, c cid.Cid) error {
	if err := checkName(rel, lname); err != nil {
		return err
	}
	if err := e.t.addEntries(1); err != nil {
		return err
	}
	child, err := e.s.node(c)
	if err != nil {
		return err
	}
	kind, perm, target, err := inspect(child)
	if err != nil {
		return err
	}
	name := path.Join(rel, lname)
	switch kind {
	case kindSymlink:
		if !linkInside(name, target) {
			return fmt.Errorf("%w: %s -> %q", ErrUnsafeLink, name, target)
		}
		return r.Symlink(target, name)
	case kindDir:
		if err := e.t.checkDepth(depth + 1); err != nil {
			return err
		}
		// Written as 0700 and set to its real mode after its
		// entries, so a read-only directory can still be filled.
		if err := r.Mkdir(name, 0o700); err != nil {
			return err
		}
		if err := e.dir(ctx, r, name, depth+1, child); err != nil {
			return err
		}
		return r.Chmod(name, perm)
	}
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return e.finishFile(ctx, f, child, perm)
}

func (e *exporter) finishFile(ctx context.Context, f *os.File, nd ipld.Node, perm fs.FileMode) error {
	claim, err := statedSize(nd)
	if err == nil {
		_, err = e.writeFile(ctx, &fileSink{f: f, t: &e.t, claim: claim}, nd, 0)
	}
	if err == nil {
		// Chmod, not the create mode, so the umask does not change it.
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return nil
}

// statedSize is the size a file's root node states: the file's size if
// the DAG is honest, and the most the file may write if it is not.
func statedSize(nd ipld.Node) (int64, error) {
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		return int64(len(nd.RawData())), nil
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return 0, fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, nd.Cid(), err)
	}
	if fsn.FileSize() > math.MaxInt64 {
		return 0, fmt.Errorf("%w: file %s declares %d bytes", ErrInvalidData, nd.Cid(), fsn.FileSize())
	}
	return int64(fsn.FileSize()), nil
}

// fileSink is where one file's bytes go. It counts them against the
// export's byte cap and refuses any byte past the size the file's root
// states, so what is written never passes what the pre-pass counted,
// whatever the blocks say.
type fileSink struct {
	f     io.Writer
	t     *tally
	claim int64 // the size the file's root node states
	n     int64 // bytes written to the file so far
}

func (w *fileSink) Write(b []byte) (int, error) {
	if int64(len(b)) > w.claim-w.n {
		return 0, fmt.Errorf("%w: file holds more than the %d bytes it declares", ErrInvalidData, w.claim)
	}
	if err := w.t.addBytes(int64(len(b))); err != nil {
		return 0, err
	}
	n, err := w.f.Write(b)
	w.n += int64(n)
	return n, err
}

// writeFile writes the content of file node nd, level links below its
// file's root: its own data, then its children in order, as UnixFS lays a
// file out. It recurses once per level; the pre-pass has bounded the
// levels, and so does the check here.
func (e *exporter) writeFile(ctx context.Context, w io.Writer, nd ipld.Node, level int) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if level > maxFileLevels {
		return 0, fmt.Errorf("%w: file DAG nested deeper than %d levels at %s", ErrInvalidData, maxFileLevels, nd.Cid())
	}
	progressAdd(e.p, int64(len(nd.RawData())))
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		n, err := w.Write(nd.RawData())
		return int64(n), err
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return 0, fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, nd.Cid(), err)
	}
	if t := fsn.Type(); t != ft.TFile && t != ft.TRaw {
		return 0, fmt.Errorf("%w: node %s of type %s inside a file", ErrInvalidData, nd.Cid(), t)
	}
	n, err := w.Write(fsn.Data())
	total := int64(n)
	if err != nil {
		return total, err
	}
	links := pn.Links()
	next, stop := e.readAhead(ctx, links)
	defer stop()
	for range links {
		child, err := next()
		if err != nil {
			return total, err
		}
		n, err := e.writeFile(ctx, w, child, level+1)
		total += n
		if err != nil {
			return total, err
		}
	}
	if level == 0 && uint64(total) != fsn.FileSize() {
		return total, fmt.Errorf("%w: file %s declares %d bytes but holds %d", ErrInvalidData, nd.Cid(), fsn.FileSize(), total)
	}
	return total, nil
}

// exportAhead is how many blocks of a file are read and verified ahead of
// the one being written. Reading a block back from its pack and hashing it
// cost about as much CPU as writing it out; done ahead, on other cores,
// they overlap with the writes.
const exportAhead = 8

// readAhead reads the nodes of links on other goroutines, at most
// exportAhead ahead of the caller, who takes them in order with next and
// must call stop when done (early or not). After stop, reads under way
// finish on their own; their results are dropped.
func (e *exporter) readAhead(ctx context.Context, links []*ipld.Link) (next func() (ipld.Node, error), stop func()) {
	type read struct {
		nd  ipld.Node
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	slots := make([]chan read, len(links))
	for i := range slots {
		slots[i] = make(chan read, 1)
	}
	ahead := make(chan struct{}, exportAhead)
	go func() {
		for i, l := range links {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				nd, err := e.s.node(l.Cid)
				slots[i] <- read{nd, err}
			}()
		}
	}()
	i := 0
	next = func() (ipld.Node, error) {
		var r read
		select {
		case r = <-slots[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		i++
		<-ahead
		return r.nd, r.err
	}
	return next, cancel
}
