package exec

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDetectCgroupsHere(t *testing.T) {
	c, err := DetectCgroups()
	if err != nil {
		t.Skipf("no usable cgroups here: %v", err)
	}
	t.Logf("%+v", c)
	if !slices.IsSorted(c.Controllers) || len(slices.Compact(slices.Clone(c.Controllers))) != len(c.Controllers) {
		t.Errorf("controllers not sorted and unique: %v", c.Controllers)
	}
	if c.V2 && c.Hybrid {
		t.Error("both v2 and hybrid")
	}
	if !c.V2 && !slices.Contains(c.Controllers, "memory") {
		t.Errorf("v1 without a memory controller passed: %v", c.Controllers)
	}
}

// TestCloseRemovesTheCgroupParent: a runner made only to prove the runtime
// leaves no empty cgroup behind.
func TestCloseRemovesTheCgroupParent(t *testing.T) {
	r := newTestRunner(t) // its probe container made the parent
	var made []string
	for _, m := range r.host.cgroups.mounts {
		dir := filepath.Join(m.point, r.host.cgroups.parent)
		if _, err := os.Stat(dir); err == nil {
			made = append(made, dir)
		}
	}
	if len(made) == 0 {
		t.Skip("the runtime made no cgroup parent to remove")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range made {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s is still there", dir)
		}
	}
}
