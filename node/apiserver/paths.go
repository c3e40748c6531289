package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/market"
)

// Local paths on a caller's behalf.
//
// A request over the unix socket names paths on this machine for the
// daemon to read (a job's inputs, an array's values_file, an image's
// layout or archive) or to write (e31 get's folder). The daemon runs as
// root, so it could read and write anything: it does so only where the
// caller, whose uid the kernel told it when the caller connected, could
// itself, by the mode bits of every directory on the way and of what is
// read or written (ACLs are not read: they can only refuse here what
// they would allow). What it writes for a caller it then gives to that
// caller (chown), as if the caller had written it.
//
// A caller that is root, or the daemon's own user, is not checked: it
// could read and write all the daemon can. Over TCP, nothing is checked
// either: who holds the token can do all the daemon can, as its user.
//
// The check comes before the daemon opens the path, not as it opens it:
// a caller that swaps a directory of its own for a link in between
// reaches what the link points to. The socket is the daemon's user's
// alone (0600) unless its owner opens it to others, and the daemon keeps
// no link inside an input (a link is staged as a link, never followed).

// ErrForbidden is a request the daemon refuses to carry out for its
// caller: a path the caller may not read or write, or a cross-origin
// request (ErrCrossOrigin).
var ErrForbidden = errors.New("forbidden")

// Permission bits, as the mode's owner, group and other triplets hold them.
const (
	permRead   = 4
	permWrite  = 2
	permSearch = 1
)

// pathCheck checks paths against one caller's rights.
type pathCheck struct {
	c      Caller
	groups map[uint32]bool
}

// pathCheckFor is the check of local paths for ctx's caller, nil where
// none is needed: over TCP, and for root and the daemon's own user.
func pathCheckFor(ctx context.Context) (*pathCheck, error) {
	c, ok, err := callerFrom(ctx)
	switch {
	case !ok:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrForbidden, err)
	case c.UID == 0 || int(c.UID) == os.Geteuid():
		return nil, nil
	}
	return &pathCheck{c: c, groups: c.groups()}, nil
}

// checkPaths runs check for ctx's caller, where one is needed
// (pathCheckFor).
func checkPaths(ctx context.Context, check func(*pathCheck) error) error {
	pc, err := pathCheckFor(ctx)
	if err != nil || pc == nil {
		return err
	}
	return check(pc)
}

// allows reports whether the caller has every bit of want on st.
func (p *pathCheck) allows(st *syscall.Stat_t, want uint32) bool {
	mode := st.Mode & 0o777
	var bits uint32
	switch {
	case st.Uid == p.c.UID:
		bits = mode >> 6
	case p.groups[st.Gid]:
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&want == want
}

// refuse is the error for a path the caller may not use as it asked.
func (p *pathCheck) refuse(what, path string) error {
	return fmt.Errorf("%w: uid %d may not %s %s", ErrForbidden, p.c.UID, what, path)
}

// lstat is os.Lstat's system record of path.
func lstat(path string) (*syscall.Stat_t, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, nil, fmt.Errorf("%s: no owner to check", path)
	}
	return st, fi, nil
}

// searchable checks that the caller may pass through every directory
// above path, as far as they are there: lexically, up to the first link,
// so that a path under a directory the caller may not enter says nothing
// of what is there, not even whether it exists; then on the path with its
// links resolved, which is where the daemon goes. It returns that path.
func (p *pathCheck) searchable(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: %q is not an absolute path", ErrForbidden, path)
	}
	path = filepath.Clean(path)
	if err := p.above(path, false); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	return real, p.above(real, true)
}

// above checks the directories above path; lexical stops at the first
// that is not there or is a link.
func (p *pathCheck) above(path string, resolved bool) error {
	var dirs []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		st, fi, err := lstat(dirs[i])
		if err != nil {
			if resolved {
				return err
			}
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 && !resolved {
			return nil
		}
		if !p.allows(st, permSearch) {
			return p.refuse("enter", dirs[i])
		}
	}
	return nil
}

// mayRead checks that the caller may read path: a file, or a folder and
// everything in it (an input is imported whole). Links inside a folder
// are not followed by the import, so they are not checked; a path that is
// not there is left for the import to say so.
func (p *pathCheck) mayRead(path string) error {
	real, err := p.searchable(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return filepath.WalkDir(real, func(name string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, fi, err := lstat(name)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir() && !p.allows(st, permRead|permSearch):
			return p.refuse("read", name)
		case fi.Mode().IsRegular() && !p.allows(st, permRead):
			return p.refuse("read", name)
		}
		return nil
	})
}

// mayWriteIn checks that the caller may make or fill dir: write in it,
// where it is there, else in the folder that would hold it. It returns
// dir with its links resolved, to write to, and whether it was there.
func (p *pathCheck) mayWriteIn(dir string) (real string, existed bool, err error) {
	if os.Geteuid() != 0 {
		return "", false, fmt.Errorf("%w: this daemon runs as uid %d, and writes as no other user (uid %d)", ErrForbidden, os.Geteuid(), p.c.UID)
	}
	real, err = p.searchable(dir)
	switch {
	case err == nil:
		existed = true
	case errors.Is(err, fs.ErrNotExist):
		parent, perr := p.searchable(filepath.Dir(filepath.Clean(dir)))
		if perr != nil {
			return "", false, perr
		}
		real = filepath.Join(parent, filepath.Base(dir))
	default:
		return "", false, err
	}
	in := filepath.Dir(real)
	if existed {
		in = real
	}
	st, fi, err := lstat(in)
	if err != nil {
		return "", false, err
	}
	if fi.IsDir() && !p.allows(st, permWrite|permSearch) {
		return "", false, p.refuse("write in", in)
	}
	return real, existed, nil
}

// give makes what was written at path, for the caller, the caller's: the
// folder itself where the daemon made it, and everything in it. Each is
// changed through an os.Root at path without following links, so that
// nothing outside is touched, whatever the caller does meanwhile in a
// folder it already owns.
func (p *pathCheck) give(path string, made bool) error {
	uid, gid := int(p.c.UID), int(p.c.GID)
	st, fi, err := lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if made && st.Uid != p.c.UID {
			return os.Lchown(path, uid, gid)
		}
		return nil
	}
	r, err := os.OpenRoot(path)
	if err != nil {
		return err
	}
	defer r.Close()
	return fs.WalkDir(r.FS(), ".", func(name string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." && !made {
			return nil
		}
		return r.Lchown(name, uid, gid)
	})
}

// declaration checks the local paths a submit request's declaration reads
// (its inputs, its values_file and its image's layout or archive). One
// that does not decode reads nothing: the submitter refuses it.
func (p *pathCheck) declaration(raw json.RawMessage) error {
	d, err := market.DecodeDeclaration(raw)
	if err != nil {
		return nil
	}
	if err := market.CheckSources(d, func(path string) (bool, error) { return true, p.mayRead(path) }); err != nil {
		return err
	}
	if a := d.Array; a != nil && a.ValuesFile != "" {
		if err := p.mayRead(a.ValuesFile); err != nil {
			return fmt.Errorf("array.values_file: %w", err)
		}
	}
	if err := p.image(d.Work.Image); err != nil {
		return fmt.Errorf("work.image: %w", err)
	}
	return nil
}

// image checks the layout or archive an image reference reads, if any.
func (p *pathCheck) image(ref string) error {
	r, err := image.ParseRef(ref)
	if ref == "" || err != nil {
		return nil // nothing to read, or refused by the import
	}
	switch r.Transport {
	case image.OCI, image.OCIArchive, image.DockerArchive:
		return p.mayRead(r.Path)
	}
	return nil
}
