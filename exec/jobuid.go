package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// A run without an image gets a host uid (and gid, the same number) of its
// own, claimed from a range for as long as its container lives: the kernel
// keeps some limits and rights per uid (RLIMIT_NPROC, inotify instances
// and watches, pipe buffers, POSIX message queue bytes, who may signal or
// ptrace whom), so two tenants running as one shared uid, as every such job
// once did as nobody, could starve or reach each other through them.
//
// The claim is a symlink in a directory shared by every runner on the
// host (RunnerOptions.UIDClaims), named by the uid and pointing at the
// claiming container's cgroup path, which names the runner and the
// container: creating a symlink is atomic, so two runs, in one daemon or in
// several on one host, never claim one uid, and nothing is held in memory.
// A run releases its uid once its container is gone; Sweep releases what a
// crashed daemon left. Image jobs keep their user namespace and its range
// (userns.go), which this range follows.
const (
	// DefaultJobUIDBase is the first host uid and gid of runs without an
	// image: the 65536 after the image jobs' range, so that a host
	// reserves both for the daemon with one line "e31:100000:131072" in
	// /etc/subuid and /etc/subgid.
	DefaultJobUIDBase = DefaultUIDBase + idRange
	// jobUIDCount is how many runs without an image can run on a host at
	// once.
	jobUIDCount = idRange
	// DefaultUIDClaims is where runners claim those uids.
	DefaultUIDClaims = "/run/e31-uids"
)

// uidPool hands out the host uids of runs without an image.
type uidPool struct {
	dir  string
	base uint32
}

// claim takes the lowest free uid of the pool for owner.
func (p uidPool) claim(owner string) (uint32, error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return 0, fmt.Errorf("job uid: %w", err)
	}
	for i := range uint32(jobUIDCount) {
		uid := p.base + i
		err := os.Symlink(owner, filepath.Join(p.dir, strconv.FormatUint(uint64(uid), 10)))
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("job uid: %w", err)
		}
	}
	return 0, fmt.Errorf("job uid: all of %d-%d are claimed in %s", p.base, p.base+jobUIDCount-1, p.dir)
}

// release gives back whatever owner claimed.
func (p uidPool) release(owner string) error {
	return p.releaseIf(func(o string) bool { return o == owner })
}

// releaseIf gives back every claim whose owner release says may go.
func (p uidPool) releaseIf(release func(owner string) bool) error {
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job uid: %w", err)
	}
	var errs []error
	for _, e := range entries {
		claim := filepath.Join(p.dir, e.Name())
		owner, err := os.Readlink(claim)
		if err != nil || !release(owner) {
			continue
		}
		if err := os.Remove(claim); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("job uid: %w", err))
		}
	}
	return errors.Join(errs...)
}

// owned is the uid owner holds, if any.
func (p uidPool) owned(owner string) (uint32, bool) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if o, err := os.Readlink(filepath.Join(p.dir, e.Name())); err == nil && o == owner {
			uid, err := strconv.ParseUint(e.Name(), 10, 32)
			return uint32(uid), err == nil
		}
	}
	return 0, false
}

// jobEtc is the passwd and group files of a run without an image: the
// user "job" with the uid it was given (HOME /tmp), and root and nobody,
// so that files owned by them have names; nothing of the host's accounts.
// Programs ask for the name of their uid (Python's getpass, which PyTorch
// calls for its caches, fails without one).
func jobEtc(uid, gid uint32) (passwd, group string) {
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
	group = "root:x:0:\n"
	if uid != jobUID {
		u, g := strconv.FormatUint(uint64(uid), 10), strconv.FormatUint(uint64(gid), 10)
		passwd += "job:x:" + u + ":" + g + ":job:/tmp:/usr/sbin/nologin\n"
		group += "job:x:" + g + ":\n"
	}
	passwd += "nobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	return passwd, group
}
