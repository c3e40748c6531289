package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/exec"
)

// Run by another user, a runc that is installed fails as a rootless
// runtime: the fix is root, not installing it again; one that is not
// there at all is still to be installed.
func TestRuntimeNotRoot(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		fix  string
	}{
		{"installed", fmt.Errorf("%w: /usr/sbin/runc: rootless container needs user namespaces", exec.ErrNoRuntime),
			"run e31d as root or through the systemd unit"},
		{"not installed", fmt.Errorf("%w: runc or crun %w", exec.ErrNoRuntime, exec.ErrRuntimeNotFound),
			"apt-get install -y runc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthy()
			h.root, h.runtimeErr = false, tc.err
			c := find(t, Run(context.Background(), h, opts), "runtime")
			if c.Status != Fail || !strings.Contains(c.Fix, tc.fix) {
				t.Fatalf("runtime = %s, fix %q; want fail, fix with %q", c.Status, c.Fix, tc.fix)
			}
		})
	}
}
