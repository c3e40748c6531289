package layers

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/e31network/e31/content/ctxio"
	"golang.org/x/sys/unix"
)

// Defaults of UnpackOptions. A layer is rarely above a few GiB; the caps are
// there to stop a tar bomb from filling the provider's disk, not to judge
// images.
const (
	DefaultMaxBytes   = 64 << 30
	DefaultMaxEntries = 1 << 20
)

// idRange is how many container ids a user namespace maps (0..65535).
const idRange = 65536

// maxTrailer is how much may follow the tar's end-of-archive marker inside
// the decompressed stream. Tools pad to a 10 KiB record; anything much
// larger is either a broken blob or a way to burn CPU.
const maxTrailer = 1 << 20

// Errors an unpack wraps, for callers that branch on why a layer was
// refused. The error also names the tar entry ([EntryError]).
var (
	// ErrUnsafePath: an absolute name, a ".." component, or a path that
	// goes through a symlink or a non-directory.
	ErrUnsafePath = errors.New("unsafe path")
	// ErrBadLink: a hard link to something this layer has not unpacked
	// (outside the layer, missing, or a directory).
	ErrBadLink = errors.New("bad hard link")
	// ErrTooLarge: the layer writes more bytes or entries than allowed.
	ErrTooLarge = errors.New("layer exceeds its size cap")
	// ErrBadOwner: an owner that the user namespace cannot map.
	ErrBadOwner = errors.New("owner outside the mapped id range")
	// ErrUnsupported: a tar entry type that has no place in a layer.
	ErrUnsupported = errors.New("unsupported tar entry type")
	// ErrMalformed: the blob is not a well-formed layer: not a tar, a
	// tar cut short, a corrupt gzip or zstd stream, data after the end.
	// Errors of the reader underneath (the store) are not marked so.
	ErrMalformed = errors.New("not a well-formed layer")
	// ErrNotEmpty: Unpack's target directory already holds something.
	ErrNotEmpty = errors.New("target directory is not empty")
)

// EntryError names the tar entry an unpack failed on, as the tar wrote it.
type EntryError struct {
	Entry string
	Err   error
}

func (e *EntryError) Error() string { return fmt.Sprintf("tar entry %q: %v", e.Entry, e.Err) }
func (e *EntryError) Unwrap() error { return e.Err }

// UnpackOptions configures [Unpack]. The zero value is usable.
type UnpackOptions struct {
	// MediaType of the blob, when known; it must then agree with the
	// compression found in the bytes. Empty: the bytes decide.
	MediaType string
	// UIDBase and GIDBase shift ownership for a user namespace that maps
	// container ids 0..65535 to Base..Base+65535 on the host: a file the
	// tar says uid 0 owns is owned by UIDBase. An id outside 0..65535 is
	// then refused. 0 keeps the tar's ids as they are.
	UIDBase, GIDBase int
	// MaxBytes bounds the file content written; 0 means DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries bounds the tar entries read; 0 means DefaultMaxEntries.
	MaxEntries int
}

func (o UnpackOptions) withDefaults() UnpackOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	return o
}

// UnpackStats counts what an unpack did.
type UnpackStats struct {
	Compression Compression
	// Entries is every tar header read, skipped ones included.
	Entries   int
	Files     int
	Dirs      int
	Symlinks  int
	Hardlinks int
	// Whiteouts and OpaqueDirs are the overlay markers written.
	Whiteouts  int
	OpaqueDirs int
	// Skipped counts device nodes and fifos (never created: a job has no
	// business with device nodes from an image) and aufs metadata entries.
	Skipped int
	// Bytes is the file content written.
	Bytes int64
}

// kind is what the unpacker has put at a path of the layer.
type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindSymlink
	kindWhiteout
)

// Overlay's on-disk markers, as the kernel reads them from a lower layer.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

// Unpack writes one layer's tar stream (plain, gzip or zstd) into dir,
// which must exist and be empty, in the format overlayfs reads from a lower
// directory: whiteouts become 0/0 character devices and opaque markers the
// trusted.overlay.opaque xattr. Every write goes through an [os.Root] on
// dir and every parent on the way is checked to be a directory this layer
// made, so nothing lands outside dir and no symlink is ever followed. It
// needs root (chown, mknod, trusted xattrs).
//
// On error dir holds a partial tree that the caller removes.
func Unpack(ctx context.Context, r io.Reader, dir string, opts UnpackOptions) (UnpackStats, error) {
	opts = opts.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return UnpackStats{}, fmt.Errorf("open layer directory: %w", err)
	}
	defer root.Close()
	if err := checkEmpty(root); err != nil {
		return UnpackStats{}, err
	}
	stream, comp, err := Decompress(ctxio.Reader(ctx, sourceReader{r}), opts.MediaType)
	if err != nil {
		return UnpackStats{}, malformed(err)
	}
	defer stream.Close()

	u := &unpacker{
		root:     root,
		opts:     opts,
		kinds:    map[string]kind{".": kindDir},
		dirTimes: map[string]time.Time{},
		buf:      make([]byte, 1<<20),
		zeros:    make([]byte, 1<<20),
	}
	u.stats.Compression = comp
	// The layer root is the container's / when this layer is on top and
	// the tar has no "./" entry: it must belong to the container's root.
	if err := root.Chown(".", opts.UIDBase, opts.GIDBase); err != nil {
		return u.stats, fmt.Errorf("chown layer root: %w", err)
	}
	if err := root.Chmod(".", 0o755); err != nil {
		return u.stats, fmt.Errorf("chmod layer root: %w", err)
	}

	tr := tar.NewReader(stream)
	last := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return u.stats, ctx.Err()
			}
			if last == "" {
				return u.stats, fmt.Errorf("read first tar entry: %w", malformed(err))
			}
			return u.stats, fmt.Errorf("read tar entry after %q: %w", last, malformed(err))
		}
		u.stats.Entries++
		if u.stats.Entries > opts.MaxEntries {
			return u.stats, &EntryError{hdr.Name, fmt.Errorf("%w: more than %d entries", ErrTooLarge, opts.MaxEntries)}
		}
		// Count every entry's size, not only files': the reader must read
		// through a skipped entry's data too.
		if hdr.Size > opts.MaxBytes-u.claimed {
			return u.stats, &EntryError{hdr.Name, fmt.Errorf("%w: %d bytes would pass the cap of %d",
				ErrTooLarge, u.claimed+hdr.Size, opts.MaxBytes)}
		}
		u.claimed += hdr.Size
		if err := u.entry(hdr, tarContent{tr}); err != nil {
			if ctx.Err() != nil {
				return u.stats, ctx.Err()
			}
			return u.stats, &EntryError{hdr.Name, err}
		}
		last = hdr.Name
	}
	if err := u.setDirTimes(); err != nil {
		return u.stats, err
	}
	// Read to the end so that gzip checks its CRC and a caller hashing the
	// blob sees every byte.
	n, err := io.CopyN(io.Discard, stream, maxTrailer+1)
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return u.stats, fmt.Errorf("read past the tar's end: %w", malformed(err))
	case n > maxTrailer:
		return u.stats, fmt.Errorf("%w: more than %d bytes of data after the tar's end", ErrMalformed, maxTrailer)
	}
	return u.stats, nil
}

func checkEmpty(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("open layer directory: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list layer directory: %w", err)
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, root.Name())
	}
	return nil
}

// unpacker holds one Unpack's state; it is used by one goroutine.
type unpacker struct {
	root *os.Root
	opts UnpackOptions
	// kinds records what this layer has put at each path. The directory
	// started empty, so this is the whole truth, and a path's parents can
	// be checked without asking the filesystem.
	kinds map[string]kind
	// dirTimes are set last: writing into a directory changes its mtime.
	dirTimes map[string]time.Time
	buf      []byte
	zeros    []byte // as long as buf, all zeros: what a hole reads as
	stats    UnpackStats
	// claimed is the sum of the sizes the headers so far declared.
	claimed int64
}

// cleanName turns a tar name into a path relative to the layer root, or
// refuses it. ".." is refused even where it would stay inside: no honest
// image tool writes it.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafePath)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute name", ErrUnsafePath)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: \"..\" in name", ErrUnsafePath)
		}
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafePath)
	}
	return path.Clean(name), nil
}

func (u *unpacker) hostIDs(hdr *tar.Header) (uid, gid int, err error) {
	uid, err = shift(hdr.Uid, u.opts.UIDBase)
	if err != nil {
		return 0, 0, fmt.Errorf("uid: %w", err)
	}
	gid, err = shift(hdr.Gid, u.opts.GIDBase)
	if err != nil {
		return 0, 0, fmt.Errorf("gid: %w", err)
	}
	return uid, gid, nil
}

func shift(id, base int) (int, error) {
	if id < 0 || (base != 0 && id >= idRange) {
		return 0, fmt.Errorf("%w: %d", ErrBadOwner, id)
	}
	return base + id, nil
}

// mode keeps permission, setuid, setgid and sticky bits: with no_new_privs
// setuid does nothing inside the job, and tools inside images expect to
// see their modes as built.
func mode(hdr *tar.Header) fs.FileMode {
	return hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

func (u *unpacker) entry(hdr *tar.Header, tr io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX defaults for later entries; the reader applies them
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if aufsMeta(name) {
		u.stats.Skipped++
		return nil
	}
	if base := path.Base(name); strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(name, base)
	}
	if name == "." && hdr.Typeflag != tar.TypeDir {
		return fmt.Errorf("%w: replaces the layer root", ErrUnsafePath)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(name, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.file(name, hdr, tr)
	case tar.TypeSymlink:
		return u.symlink(name, hdr)
	case tar.TypeLink:
		return u.hardlink(name, hdr)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.stats.Skipped++
		return nil
	}
	return fmt.Errorf("%w: %q", ErrUnsupported, hdr.Typeflag)
}

// aufsMeta reports aufs bookkeeping entries (.wh..wh.plnk/…, .wh..wh.aufs),
// meaningless to overlay: a name with a component starting ".wh..wh."
// other than a final opaque marker.
func aufsMeta(name string) bool {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, whiteoutMeta) && (i < len(parts)-1 || p != whiteoutOpaque) {
			return true
		}
	}
	return false
}

// parents makes sure every directory above name is a directory of this
// layer, creating missing ones as the container root's with mode 0755 (as
// containerd does for tars that omit them).
func (u *unpacker) parents(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		p := name[:i]
		switch k, ok := u.kinds[p]; {
		case !ok:
			if err := u.root.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("create parent: %w", err)
			}
			if err := u.root.Chown(p, u.opts.UIDBase, u.opts.GIDBase); err != nil {
				return fmt.Errorf("chown parent: %w", err)
			}
			u.kinds[p] = kindDir
		case k == kindSymlink:
			return fmt.Errorf("%w: %q is a symlink", ErrUnsafePath, p)
		case k != kindDir:
			return fmt.Errorf("%w: %q is not a directory", ErrUnsafePath, p)
		}
	}
	return nil
}

// clear removes what this layer put at name before, as a later entry of a
// tar replaces an earlier one. A directory replaced by a directory stays,
// with its contents.
func (u *unpacker) clear(name string, next kind) (kept bool, err error) {
	k, ok := u.kinds[name]
	if !ok {
		return false, nil
	}
	if k == kindDir && next == kindDir {
		return true, nil
	}
	if name == "." {
		return false, fmt.Errorf("%w: replaces the layer root", ErrUnsafePath)
	}
	if err := u.root.RemoveAll(name); err != nil {
		return false, fmt.Errorf("replace: %w", err)
	}
	delete(u.kinds, name)
	if k == kindDir {
		prefix := name + "/"
		for p := range u.kinds {
			if strings.HasPrefix(p, prefix) {
				delete(u.kinds, p)
			}
		}
		for p := range u.dirTimes {
			if p == name || strings.HasPrefix(p, prefix) {
				delete(u.dirTimes, p)
			}
		}
	}
	return false, nil
}

// prepare checks name's parents and clears the way for a new entry.
func (u *unpacker) prepare(name string, next kind) (kept bool, err error) {
	if err := u.parents(name); err != nil {
		return false, err
	}
	return u.clear(name, next)
}

func (u *unpacker) dir(name string, hdr *tar.Header) error {
	uid, gid, err := u.hostIDs(hdr)
	if err != nil {
		return err
	}
	kept, err := u.prepare(name, kindDir)
	if err != nil {
		return err
	}
	if !kept {
		if err := u.root.Mkdir(name, 0o700); err != nil {
			return err
		}
		u.kinds[name] = kindDir
	}
	// Chown before chmod: chown may clear setgid.
	if err := u.root.Chown(name, uid, gid); err != nil {
		return err
	}
	if err := u.root.Chmod(name, mode(hdr)); err != nil {
		return err
	}
	u.dirTimes[name] = hdr.ModTime
	u.stats.Dirs++
	return nil
}

// copySparse copies an entry's content into f, leaving a hole wherever a
// whole buffer of it is zeros: a layer's zeros, a GNU sparse file's holes
// (which the tar reader gives as zeros) or a gzip bomb of them, cost the
// time to read them but no disk. A few KB of layer could otherwise make
// the provider write up to the layer cap.
func (u *unpacker) copySparse(f *os.File, r io.Reader) (int64, error) {
	var n int64
	hole := false
	for {
		m, err := io.ReadFull(r, u.buf)
		if m > 0 {
			chunk := u.buf[:m]
			if bytes.Equal(chunk, u.zeros[:m]) {
				if _, serr := f.Seek(int64(m), io.SeekCurrent); serr != nil {
					return n, serr
				}
				hole = true
			} else {
				if _, werr := f.Write(chunk); werr != nil {
					return n, werr
				}
				hole = false
			}
			n += int64(m)
		}
		// ReadFull's own end of the data, unwrapped; a tar cut short
		// comes wrapped as ErrMalformed (tarContent), and fails.
		if err == io.EOF || err == io.ErrUnexpectedEOF { //nolint:errorlint // ReadFull's sentinels, never wrapped
			break
		}
		if err != nil {
			return n, err
		}
	}
	if hole {
		// A file that ends in a hole has its size only once it is set.
		if err := f.Truncate(n); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (u *unpacker) file(name string, hdr *tar.Header, tr io.Reader) error {
	uid, gid, err := u.hostIDs(hdr)
	if err != nil {
		return err
	}
	if _, err := u.prepare(name, kindFile); err != nil {
		return err
	}
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	u.kinds[name] = kindFile
	n, err := u.copySparse(f, tr)
	u.stats.Bytes += n
	if err != nil {
		f.Close()
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Chown(uid, gid); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode(hdr)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := u.root.Chtimes(name, hdr.ModTime, hdr.ModTime); err != nil {
		return err
	}
	u.stats.Files++
	return nil
}

func (u *unpacker) symlink(name string, hdr *tar.Header) error {
	uid, gid, err := u.hostIDs(hdr)
	if err != nil {
		return err
	}
	if _, err := u.prepare(name, kindSymlink); err != nil {
		return err
	}
	// The target is stored as written: it is resolved inside the job's
	// root at run time, and never followed here.
	if err := u.root.Symlink(hdr.Linkname, name); err != nil {
		return err
	}
	u.kinds[name] = kindSymlink
	if err := u.root.Lchown(name, uid, gid); err != nil {
		return err
	}
	if err := u.inParent(name, func(dirfd int, base string) error {
		return lutimes(dirfd, base, hdr.ModTime)
	}); err != nil {
		return err
	}
	u.stats.Symlinks++
	return nil
}

func (u *unpacker) hardlink(name string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("%w: to %q: %w", ErrBadLink, hdr.Linkname, err)
	}
	switch k := u.kinds[target]; {
	case k == 0:
		return fmt.Errorf("%w: to %q, which this layer has not unpacked", ErrBadLink, hdr.Linkname)
	case k != kindFile && k != kindSymlink:
		return fmt.Errorf("%w: to %q, which is not a file", ErrBadLink, hdr.Linkname)
	case target == name:
		return fmt.Errorf("%w: to itself", ErrBadLink)
	}
	k := u.kinds[target]
	if _, err := u.prepare(name, k); err != nil {
		return err
	}
	// Link does not follow a symlink target: a link to a symlink is a
	// second name for the symlink, as in the tar.
	if err := u.root.Link(target, name); err != nil {
		return err
	}
	u.kinds[name] = k
	u.stats.Hardlinks++
	return nil
}

// whiteout writes the overlay form of an OCI whiteout entry.
func (u *unpacker) whiteout(name, base string) error {
	if base == whiteoutOpaque {
		dir := path.Dir(name)
		if err := u.parents(name); err != nil {
			return err
		}
		if err := u.inDir(dir, func(dirfd int) error {
			return unix.Fsetxattr(dirfd, opaqueXattr, []byte("y"), 0)
		}); err != nil {
			return fmt.Errorf("mark %q opaque: %w", dir, err)
		}
		u.stats.OpaqueDirs++
		return nil
	}
	hidden := strings.TrimPrefix(base, whiteoutPrefix)
	if hidden == "" || hidden == "." || hidden == ".." {
		return fmt.Errorf("%w: whiteout of %q", ErrUnsafePath, hidden)
	}
	target := path.Join(path.Dir(name), hidden)
	if _, err := u.prepare(target, kindWhiteout); err != nil {
		return err
	}
	if err := u.inParent(target, func(dirfd int, base string) error {
		return unix.Mknodat(dirfd, base, unix.S_IFCHR, 0)
	}); err != nil {
		return fmt.Errorf("whiteout %q: %w", target, err)
	}
	u.kinds[target] = kindWhiteout
	if err := u.root.Lchown(target, u.opts.UIDBase, u.opts.GIDBase); err != nil {
		return err
	}
	u.stats.Whiteouts++
	return nil
}

// inParent calls fn with a descriptor of name's parent directory, opened
// through the root, and name's last component: for the calls os.Root does
// not offer (mknod, xattrs, times of a symlink).
func (u *unpacker) inParent(name string, fn func(dirfd int, base string) error) error {
	return u.inDir(path.Dir(name), func(dirfd int) error { return fn(dirfd, path.Base(name)) })
}

func (u *unpacker) inDir(dir string, fn func(dirfd int) error) error {
	d, err := u.root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(int(d.Fd()))
}

func lutimes(dirfd int, base string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	ts, err := unix.TimeToTimespec(t)
	if err != nil {
		return err
	}
	return unix.UtimesNanoAt(dirfd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

func (u *unpacker) setDirTimes() error {
	for name, t := range u.dirTimes {
		if u.kinds[name] != kindDir || t.IsZero() {
			continue
		}
		if err := u.root.Chtimes(name, t, t); err != nil {
			return fmt.Errorf("set time of %q: %w", name, err)
		}
	}
	return nil
}

// sourceReader marks the errors of the reader the blob comes from as the
// source's (sourceError); io.EOF is passed on as it is.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}

// sourceError is an error of the reader the blob comes from (the store, a
// digest check on the way): the blob's bytes may be fine, so it is not
// taken for a malformed layer.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// tarContent marks the errors of reading an entry's content as the tar's,
// so that a tar cut short inside a file is told from a failed write.
type tarContent struct{ r io.Reader }

func (t tarContent) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		err = malformed(err)
	}
	return n, err
}

// malformed marks err, an error of reading the layer's bytes, as the
// layer's fault (ErrMalformed), unless it came from the reader underneath
// or from the context.
func malformed(err error) error {
	var se *sourceError
	if errors.As(err, &se) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrMediaType) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}
