package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Cgroups describes the host's cgroups as the runner finds them, for a
// health check of the machine before it offers compute.
type Cgroups struct {
	// V2 is a pure cgroup v2 host. Hybrid is a v1 host with a cgroup2
	// hierarchy beside the controllers (runc copes with it; crun 1.8 does
	// not).
	V2, Hybrid bool
	// Controllers are the controllers available, sorted.
	Controllers []string
	// SwapLimit says memory+swap can be limited; where it cannot, a job
	// could spill into swap.
	SwapLimit bool
}

// DetectCgroups reads the host's cgroup layout the way NewRunner does.
// It fails where the runner would: no cgroup mounts, or no memory
// controller.
func DetectCgroups() (Cgroups, error) {
	c, err := detectCgroups()
	if err != nil {
		return Cgroups{}, err
	}
	out := Cgroups{V2: c.unified, Hybrid: !c.unified && c.v2() != "", SwapLimit: c.swap}
	if c.unified {
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return Cgroups{}, err
		}
		out.Controllers = strings.Fields(string(b))
	} else {
		for _, m := range c.mounts {
			out.Controllers = append(out.Controllers, m.controllers...)
		}
	}
	slices.Sort(out.Controllers)
	out.Controllers = slices.Compact(out.Controllers)
	return out, nil
}

// Close removes the runner's own cgroup parent (/e31/<runner>) from every
// hierarchy where it is empty. A daemon keeps its runner for its life and
// need not call it; a program that makes a runner only to prove the
// runtime (e31d doctor) calls it so that no empty cgroup is left behind
// per probe. Containers still running keep theirs.
func (r *Runner) Close() error {
	var errs []error
	for _, m := range r.host.cgroups.mounts {
		err := os.Remove(filepath.Join(m.point, r.host.cgroups.parent))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, fmt.Errorf("remove cgroup parent: %w", err))
		}
	}
	return errors.Join(errs...)
}
