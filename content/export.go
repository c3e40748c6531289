package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
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
func (s *Store) Export(ctx context.Context, root cid.Cid, dest string, p Progress) error {
	sc, err := s.scan(ctx, root)
	if err != nil {
		return fmt.Errorf("export %s: %w", root, err)
	}
	if len(sc.missing) > 0 {
		return fmt.Errorf("export %s: %w: %d subtrees missing, first %s", root, ErrIncomplete, len(sc.missing), sc.missing[0])
	}
	progressStart(p, sc.bytes, "export "+root.String())
	defer progressDone(p)
	e := exporter{s: s, p: p}
	if err := e.export(ctx, root, dest); err != nil {
		return fmt.Errorf("export %s to %s: %w", root, dest, err)
	}
	return nil
}

// ErrUnsafeLink means a DAG holds a symlink whose target is absolute or
// climbs out of the export directory.
var ErrUnsafeLink = errors.New("content: symlink in DAG points outside it")

type exporter struct {
	s *Store
	p Progress
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
	if err := e.dir(ctx, r, ".", nd); err != nil {
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
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: %q in %s", ErrUnsafeName, name, dir)
	}
	return nil
}

// dir writes the entries of directory node nd into rel, inside r.
func (e *exporter) dir(ctx context.Context, r *os.Root, rel string, nd ipld.Node) error {
	d, err := uio.NewDirectoryFromNode(storeDAG{e.s}, nd)
	if err != nil {
		return fmt.Errorf("directory %s: %w", nd.Cid(), err)
	}
	return d.ForEachLink(ctx, func(l *ipld.Link) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := checkName(rel, l.Name); err != nil {
			return err
		}
		child, err := e.s.node(l.Cid)
		if err != nil {
			return err
		}
		kind, perm, target, err := inspect(child)
		if err != nil {
			return err
		}
		name := path.Join(rel, l.Name)
		switch kind {
		case kindSymlink:
			if !linkInside(name, target) {
				return fmt.Errorf("%w: %s -> %q", ErrUnsafeLink, name, target)
			}
			return r.Symlink(target, name)
		case kindDir:
			// Written as 0700 and set to its real mode after its
			// entries, so a read-only directory can still be filled.
			if err := r.Mkdir(name, 0o700); err != nil {
				return err
			}
			if err := e.dir(ctx, r, name, child); err != nil {
				return err
			}
			return r.Chmod(name, perm)
		}
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		return e.finishFile(ctx, f, child, perm)
	})
}

func (e *exporter) finishFile(ctx context.Context, f *os.File, nd ipld.Node, perm fs.FileMode) error {
	_, err := e.writeFile(ctx, f, nd, true)
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

// writeFile writes the content of file node nd: its own data, then its
// children in order, as UnixFS lays a file out.
func (e *exporter) writeFile(ctx context.Context, w io.Writer, nd ipld.Node, top bool) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
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
		n, err := e.writeFile(ctx, w, child, false)
		total += n
		if err != nil {
			return total, err
		}
	}
	if top && uint64(total) != fsn.FileSize() {
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
