package exec

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// cgroupRoot is the cgroup under which every runner makes its own parent:
// a job's cgroupsPath is /e31/<runner>/<container id>, a plain path rather
// than a systemd slice, so the same layout works with or without systemd
// and on v1 and v2. <runner> derives from the runner's state root, so that
// several daemons on one host (a test network) never sweep each other's
// cgroups: a cgroup is empty for a moment between its creation and its
// first process, and a neighbour's sweep must not remove it then.
const cgroupRoot = "/e31"

// cgroupParentFor is the cgroup parent of the runner with a state root.
func cgroupParentFor(stateRoot string) string {
	sum := sha256.Sum256([]byte(stateRoot))
	return cgroupRoot + "/" + hex.EncodeToString(sum[:6])
}

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	point       string
	v2          bool
	controllers []string // v1 only
}

// cgroupLayout is what the runner needs to know of the host's cgroups: where
// to read a job's OOM counters and which directories to remove if the
// runtime leaves one behind.
type cgroupLayout struct {
	// unified is a pure cgroup v2 host (/sys/fs/cgroup is cgroup2). On a
	// hybrid host the controllers are v1 and a controller-less cgroup2
	// hierarchy sits beside them.
	unified bool
	mounts  []cgroupMount
	// swap is whether memory+swap can be limited; where it cannot, the
	// runtime rejects a swap limit.
	swap bool
	// parent is this runner's cgroup parent (cgroupParentFor).
	parent string
	// io is what can be limited of a job's block I/O (hostview.go).
	io ioSupport
}

const cgroup2Magic = 0x63677270

// detectCgroups reads the host's cgroup layout.
func detectCgroups() (cgroupLayout, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	mounts, err := parseCgroupMounts(f)
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("cgroups: %w", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return cgroupLayout{}, fmt.Errorf("cgroups: %w", err)
	}
	c := cgroupLayout{unified: st.Type == cgroup2Magic, mounts: mounts}
	if c.unified {
		c.swap = v2SwapAccounted("/sys/fs/cgroup")
	} else if mem := c.v1("memory"); mem != "" {
		_, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
		c.swap = err == nil
	} else {
		return c, errors.New("cgroups: no memory controller mounted")
	}
	c.io = detectIO(c)
	return c, nil
}

// v2SwapAccounted looks for memory.swap.max, which exists in every
// non-root cgroup when swap accounting is on (the root cgroup has no
// memory files, so look one level down).
func v2SwapAccounted(root string) bool {
	entries, err := os.ReadDir(root)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), "memory.swap.max")); err == nil {
			return true
		}
	}
	return false
}

// parseCgroupMounts picks the cgroup and cgroup2 mounts out of a
// /proc/self/mountinfo.
func parseCgroupMounts(r io.Reader) ([]cgroupMount, error) {
	var mounts []cgroupMount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super-options
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		point := unescapeMountinfo(fields[4])
		switch fields[sep+1] {
		case "cgroup2":
			mounts = append(mounts, cgroupMount{point: point, v2: true})
		case "cgroup":
			var ctrls []string
			for o := range strings.SplitSeq(fields[sep+3], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
					ctrls = append(ctrls, o)
				}
			}
			mounts = append(mounts, cgroupMount{point: point, controllers: ctrls})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return mounts, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) the
// kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// v1 is the mount point of a v1 controller, or "".
func (c cgroupLayout) v1(controller string) string {
	for _, m := range c.mounts {
		if !m.v2 && slices.Contains(m.controllers, controller) {
			return m.point
		}
	}
	return ""
}

// v2 is the mount point of the cgroup2 hierarchy, or "".
func (c cgroupLayout) v2() string {
	for _, m := range c.mounts {
		if m.v2 {
			return m.point
		}
	}
	return ""
}

// path is the cgroupsPath of container cid.
func (c cgroupLayout) path(cid string) string {
	parent := c.parent
	if parent == "" {
		parent = cgroupRoot
	}
	return parent + "/" + cid
}

// oomKilled reports whether the kernel OOM-killed a process of the
// container's memory cgroup. known is false when the kernel keeps no
// oom_kill counter (v1 before Linux 4.13); then hitLimit says whether the
// cgroup ever reached its limit, which with a SIGKILL exit is the best
// evidence left.
func (c cgroupLayout) oomKilled(cid string) (killed, known, hitLimit bool) {
	if c.unified {
		n, ok := readKeyed(filepath.Join(c.v2(), c.path(cid), "memory.events"), "oom_kill")
		return n > 0, ok, false
	}
	dir := filepath.Join(c.v1("memory"), c.path(cid))
	n, ok := readKeyed(filepath.Join(dir, "memory.oom_control"), "oom_kill")
	if ok {
		return n > 0, true, false
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.failcnt"))
	if err != nil {
		return false, false, false
	}
	fc, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return false, false, fc > 0
}

// readKeyed reads the value of key from a "key value" per line file.
func readKeyed(name, key string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// remove deletes the container's cgroup directories in every hierarchy
// where the runtime left one. A cgroup directory is removed with rmdir,
// which fails while processes remain in it.
func (c cgroupLayout) remove(cid string) error {
	var errs []error
	for _, m := range c.mounts {
		dir := filepath.Join(m.point, c.path(cid))
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// leftovers lists the container IDs that have a cgroup directory under this
// runner's parent in any hierarchy.
func (c cgroupLayout) leftovers() []string {
	var ids []string
	for _, m := range c.mounts {
		entries, err := os.ReadDir(filepath.Join(m.point, c.path("")))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "e31-") && !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	return ids
}

// procs lists the host PIDs of the container's processes, from its cgroup
// in the unified hierarchy or, on v1, the memory controller's.
func (c cgroupLayout) procs(cid string) ([]int, error) {
	root := c.v2()
	if !c.unified {
		root = c.v1("memory")
	}
	if root == "" {
		return nil, errors.New("cgroups: no hierarchy to list the job's processes in")
	}
	b, err := os.ReadFile(filepath.Join(root, c.path(cid), "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroups: cgroup.procs holds %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
