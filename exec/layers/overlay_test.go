package layers

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOverlayReadsTheFormat mounts real overlayfs over two layers unpacked
// through the cache, as the sandbox will, and checks the merged view.
func TestOverlayReadsTheFormat(t *testing.T) {
	requireRoot(t)
	lower := newBlob(t,
		dir("etc/"), file("etc/keep", "kept"), file("etc/gone", "deleted above"),
		dir("opq/"), file("opq/a", "hidden"), dir("opq/sub/"), file("opq/sub/b", "hidden"),
		file("bin/tool", "lower tool"),
	)
	upper := newBlob(t,
		file("etc/.wh.gone", ""),
		file("opq/.wh..wh..opq", ""), file("opq/new", "only this"),
		file("bin/tool", "upper tool"),
		file("hl/x", "shared"), hardlink("hl/y", "hl/x"),
		symlink("hl/abs", "/etc/keep"),
	)
	const base = 200000
	c := openCache(t, t.TempDir(), CacheOptions{Unpack: UnpackOptions{UIDBase: base, GIDBase: base}})
	lowerDir, relLower := acquire(t, c, lower)
	defer relLower()
	upperDir, relUpper := acquire(t, c, upper)
	defer relUpper()

	merged := t.TempDir()
	opts := "ro,lowerdir=" + upperDir + ":" + lowerDir // top first
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, opts); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENODEV) {
			t.Skipf("cannot mount overlayfs here: %v", err)
		}
		t.Fatalf("mount overlay %s: %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	p := func(rel string) string { return filepath.Join(merged, rel) }

	if b, err := os.ReadFile(p("etc/keep")); err != nil || string(b) != "kept" {
		t.Errorf("etc/keep: %q, %v", b, err)
	}
	if _, err := os.Lstat(p("etc/gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("etc/gone, whited out above, is visible: %v", err)
	}
	if names := list(t, p("etc")); !slices.Equal(names, []string{"keep"}) {
		t.Errorf("etc lists %q", names)
	}
	if names := list(t, p("opq")); !slices.Equal(names, []string{"new"}) {
		t.Errorf("opaque opq lists %q, want only new", names)
	}
	if b, err := os.ReadFile(p("bin/tool")); err != nil || string(b) != "upper tool" {
		t.Errorf("bin/tool: %q, %v", b, err)
	}
	var x, y syscall.Stat_t
	if err := syscall.Stat(p("hl/x"), &x); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(p("hl/y"), &y); err != nil {
		t.Fatal(err)
	}
	if x.Ino != y.Ino || x.Nlink != 2 {
		t.Errorf("hard link pair: inodes %d %d, nlink %d", x.Ino, y.Ino, x.Nlink)
	}
	if x.Uid != base {
		t.Errorf("hl/x owned by %d, want %d", x.Uid, base)
	}
	if got, err := os.Readlink(p("hl/abs")); err != nil || got != "/etc/keep" {
		t.Errorf("hl/abs -> %q, %v", got, err)
	}
	if err := os.WriteFile(p("etc/new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write into the read-only overlay: %v, want EROFS", err)
	}
}

func list(tb testing.TB, dir string) []string {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
