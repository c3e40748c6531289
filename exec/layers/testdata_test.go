package layers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Layers written by other tools than Go's archive/tar: GNU tar (GNU long
// names, hard links, setgid, a whiteout) and Python's tarfile (hostile).
// testdata/README says how each was made.

func TestGNUTarLayer(t *testing.T) {
	requireRoot(t)
	f, err := os.Open("testdata/gnutar.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	st, err := Unpack(context.Background(), f, dir, UnpackOptions{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip"})
	if err != nil {
		t.Fatal(err)
	}
	long := "usr/share/a-very-long-directory-name-that-pushes-the-path-past-one-hundred-bytes/and-then-some-more/file-with-a-long-name.txt"
	if b, err := os.ReadFile(filepath.Join(dir, long)); err != nil || string(b) != "hello\n" {
		t.Errorf("long name: %q, %v", b, err)
	}
	var a, b syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, "etc/conf"), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(dir, "etc/conf.hardlink"), &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino {
		t.Error("hard link not preserved")
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin/tool")); err != nil || fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("bin/tool: %v, %v; want setgid kept", fi.Mode(), err)
	}
	if got, _ := os.Readlink(filepath.Join(dir, "bin/conf-link")); got != "../etc/conf" {
		t.Errorf("symlink -> %q", got)
	}
	if st.Whiteouts != 1 || st.Hardlinks != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestForeignHostileLayers(t *testing.T) {
	requireRoot(t)
	for name, want := range map[string]error{
		"escape-symlink.tar":  ErrUnsafePath,
		"hardlink-shadow.tar": ErrBadLink,
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			top := t.TempDir()
			layer, outside := filepath.Join(top, "layer"), filepath.Join(top, "outside")
			mkdirs(t, layer, outside)
			writeFile(t, filepath.Join(outside, "sentinel"), "untouched")
			_, err = Unpack(context.Background(), f, layer, UnpackOptions{})
			var ee *EntryError
			if !errors.Is(err, want) || !errors.As(err, &ee) || !strings.Contains(err.Error(), ee.Entry) {
				t.Fatalf("err %v, want %v naming the entry", err, want)
			}
			assertOnlyLayerWritten(t, top)
		})
	}
}
