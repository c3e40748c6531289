package exec

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Image jobs run in a user namespace: container ids 0..idRange-1 are host
// ids base..base+idRange-1, so the job's root is an unprivileged host uid
// that owns nothing outside the job's own files.
const (
	idRange = 65536
	// DefaultUIDBase is the first host uid and gid of the range image
	// jobs run as. It is the range useradd gives the first user in
	// /etc/subuid, so a host that has such a user must either reserve the
	// range for the daemon (a line "e31:100000:65536" in /etc/subuid and
	// /etc/subgid, which useradd then skips; "e31:100000:131072" takes
	// DefaultJobUIDBase's range too) or set another base.
	DefaultUIDBase uint32 = 100000
	// subIDOwner is the name under which the range is reserved.
	subIDOwner = "e31"
)

// ErrIDRange is wrapped by ImageSupport's error when the uid range for image jobs
// overlaps another owner's range in /etc/subuid or /etc/subgid: that
// owner's rootless containers would share host uids with jobs, and could
// signal them or read their files.
var ErrIDRange = errors.New("uid range for image jobs is not the daemon's own")

// checkSubIDs fails if [base, base+size) overlaps a range that the file
// (/etc/subuid format, "name:start:count" per line) gives to anyone but
// subIDOwner. A missing file reserves nothing.
func checkSubIDs(r io.Reader, name string, base, size uint32) error {
	sc := bufio.NewScanner(r)
	lo, hi := uint64(base), uint64(base)+uint64(size)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || f[0] == subIDOwner {
			continue
		}
		if start < hi && lo < start+count {
			return fmt.Errorf("%w: %s gives %d-%d to %q, which overlaps %d-%d; reserve a free range with a line %q there and set the runner's base to it",
				ErrIDRange, name, start, start+count-1, f[0], lo, hi-1, fmt.Sprintf("%s:%d:%d", subIDOwner, base, size))
		}
	}
	return sc.Err()
}

// checkHostSubIDs is checkSubIDs of /etc/subuid and /etc/subgid.
func checkHostSubIDs(base, size uint32) error {
	if uint64(base)+uint64(size) > 1<<32-1 || base == 0 {
		return fmt.Errorf("%w: base %d", ErrIDRange, base)
	}
	for _, name := range []string{"/etc/subuid", "/etc/subgid"} {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = checkSubIDs(f, name, base, size)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// userNamespace adds the user namespace and its id maps to cfg.
func userNamespace(cfg *specs.Spec, base uint32) {
	cfg.Linux.Namespaces = append(cfg.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
	cfg.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: idRange}}
	cfg.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: idRange}}
}

// handOver makes dir, and everything in it, owned by uid:gid on the host.
// It never follows a symlink: a checkpoint restored from an earlier run
// is the job's own making and may hold links to anywhere.
func handOver(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
