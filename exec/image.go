package exec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ImageRoot is a job's own OCI image, already unpacked: the sandbox's root
// is an overlay of Layers, read-only, instead of the host's system
// directories.
type ImageRoot struct {
	// Layers are unpacked layer directories in overlay format (whiteouts
	// as 0/0 character devices, opaque directories marked with the
	// trusted.overlay.opaque xattr), the top layer first, owned on the
	// host by RunnerOptions.UIDBase plus the owner inside the image.
	Layers []string
	// Config is the image's run configuration.
	Config ImageConfig
}

// ImageConfig is the part of an OCI image's config that says how to run
// it (the "config" object of an image configuration).
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	// Env holds KEY=value entries.
	Env []string
	// WorkingDir is the job's working directory; "" means /.
	WorkingDir string
	// User is "", "uid", "uid:gid", "name", "name:group" or a mix of
	// names and numbers, resolved through the image's /etc/passwd and
	// /etc/group. "" means root.
	User string
}

// defaultPath is PATH when neither the image nor the job sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageArgs is the process of a job run in an image, as `docker run`
// computes it: a job's command replaces both the image's Entrypoint and
// its Cmd; without one, the image's Entrypoint followed by its Cmd runs.
func imageArgs(command []string, c ImageConfig) ([]string, error) {
	args := command
	if len(args) == 0 {
		args = slices.Concat(c.Entrypoint, c.Cmd)
	}
	if len(args) == 0 || args[0] == "" {
		return nil, fmt.Errorf("%w: no command: the job gives none and the image has neither Entrypoint nor Cmd", ErrSpec)
	}
	return slices.Clone(args), nil
}

// imageEnv merges the image's environment under the job's: the job's
// variables win. Malformed image entries (no "=") are dropped, as Docker
// does.
func imageEnv(c ImageConfig, job map[string]string) map[string]string {
	env := map[string]string{"PATH": defaultPath}
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && !strings.Contains(kv, "\x00") {
			env[k] = v
		}
	}
	maps.Copy(env, job)
	return env
}

// imageWorkDir is the working directory of a job in an image.
func imageWorkDir(c ImageConfig) (string, error) {
	if c.WorkingDir == "" {
		return "/", nil
	}
	if !path.IsAbs(c.WorkingDir) || strings.Contains(c.WorkingDir, "\x00") {
		return "", fmt.Errorf("%w: image WorkingDir %q is not absolute", ErrSpec, c.WorkingDir)
	}
	return path.Clean(c.WorkingDir), nil
}

// imageUser is a job's identity inside its image.
type imageUser struct {
	uid, gid uint32
	// groups are the supplementary groups: those of /etc/group that
	// list the user's name as a member, as Docker and runc give them.
	groups []uint32
	// home is the passwd entry's home directory, or /root for uid 0
	// without an entry, or "".
	home string
}

// maxID is the highest uid or gid a job may take: the user namespace maps
// container ids 0..idRange-1.
const maxID = idRange - 1

// ErrNoSuchUser is wrapped by the error for an image User that the image's
// /etc/passwd or /etc/group does not know.
var ErrNoSuchUser = errors.New("user or group not found in the image")

// resolveUser resolves an image's User against the image's passwd and
// group files (nil when the image has none), the way runc and Docker do:
// a number is taken as is, a name must be in the file; with no group
// given, the user's primary group from passwd (0 when the uid has no
// entry).
func resolveUser(spec string, passwd, group []byte) (imageUser, error) {
	u := imageUser{}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	users := parseIDFile(passwd, 7)
	if userPart == "" {
		userPart = "0"
	}
	var entry []string
	if n, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		u.uid = uint32(n)
		for _, e := range users {
			if e[2] == userPart {
				entry = e
				break
			}
		}
	} else {
		for _, e := range users {
			if e[0] == userPart {
				entry = e
				break
			}
		}
		if entry == nil {
			return u, fmt.Errorf("%w: user %q", ErrNoSuchUser, userPart)
		}
		n, err := strconv.ParseUint(entry[2], 10, 32)
		if err != nil {
			return u, fmt.Errorf("%w: user %q has uid %q", ErrSpec, userPart, entry[2])
		}
		u.uid = uint32(n)
	}
	if entry != nil {
		if n, err := strconv.ParseUint(entry[3], 10, 32); err == nil {
			u.gid = uint32(n)
		}
		u.home = entry[5]
	}
	if u.home == "" && u.uid == 0 {
		u.home = "/root"
	}
	if hasGroup {
		if groupPart == "" {
			return u, fmt.Errorf("%w: user %q has an empty group", ErrSpec, spec)
		}
		if n, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			u.gid = uint32(n)
		} else {
			found := false
			for _, e := range parseIDFile(group, 4) {
				if e[0] == groupPart {
					n, err := strconv.ParseUint(e[2], 10, 32)
					if err != nil {
						return u, fmt.Errorf("%w: group %q has gid %q", ErrSpec, groupPart, e[2])
					}
					u.gid, found = uint32(n), true
					break
				}
			}
			if !found {
				return u, fmt.Errorf("%w: group %q", ErrNoSuchUser, groupPart)
			}
		}
	}
	if u.uid > maxID || u.gid > maxID {
		return u, fmt.Errorf("%w: user %q is %d:%d, beyond the %d ids the sandbox maps", ErrSpec, spec, u.uid, u.gid, idRange)
	}
	if entry != nil {
		for _, e := range parseIDFile(group, 4) {
			n, err := strconv.ParseUint(e[2], 10, 32)
			if err != nil || n > maxID || uint32(n) == u.gid || slices.Contains(u.groups, uint32(n)) {
				continue
			}
			if slices.Contains(strings.Split(e[3], ","), entry[0]) {
				u.groups = append(u.groups, uint32(n))
			}
		}
	}
	return u, nil
}

// parseIDFile splits a passwd (7 fields) or group (4 fields) file into
// entries of exactly that many fields, skipping comments and malformed
// lines. The file comes from the job's image: nothing in it is trusted.
func parseIDFile(b []byte, fields int) [][]string {
	var out [][]string
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != fields || f[0] == "" {
			continue
		}
		out = append(out, f)
	}
	return out
}

// maxIDFile bounds how much of the image's passwd or group file is read.
const maxIDFile = 1 << 20

// readImageFile reads name (relative, e.g. "etc/passwd") from the mounted
// image root without leaving it: an image's /etc/passwd may be a symlink
// to an absolute path, which must resolve inside the image, never to the
// host's file. A missing file is nil, not an error.
func readImageFile(root *os.Root, name string) ([]byte, error) {
	// Stat before open: opening a FIFO would block. The root is a
	// read-only mount, so the file cannot change in between.
	st, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxIDFile))
}

// imageHome is the directory that gets a private tmpfs as the job's HOME:
// the user's home when it is a real directory of the image that no other
// sandbox mount covers or sits inside; otherwise "" and HOME is /tmp.
func imageHome(root *os.Root, home string, taken []string) string {
	if home == "" || !path.IsAbs(home) {
		return ""
	}
	home = path.Clean(home)
	if home == "/" || home == "/tmp" {
		return ""
	}
	for _, t := range taken {
		if t == home || strings.HasPrefix(home, t+"/") || strings.HasPrefix(t, home+"/") {
			return ""
		}
	}
	st, err := root.Lstat(filepath.FromSlash(strings.TrimPrefix(home, "/")))
	if err != nil || !st.IsDir() {
		return ""
	}
	return home
}
