package layers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUmociImage unpacks layers written by another tool: umoci builds an
// image from busybox-static in two layers, the second deleting a hard link
// of the first (a whiteout as umoci writes it). Through the cache and a
// real overlay mount, the merged root runs busybox.
func TestUmociImage(t *testing.T) {
	requireRoot(t)
	umoci, err := exec.LookPath("umoci")
	if err != nil {
		t.Skip("umoci is not installed")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox is not installed")
	}
	work := t.TempDir()
	img, bundle := filepath.Join(work, "img"), filepath.Join(work, "bundle")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(umoci, args...).CombinedOutput(); err != nil {
			t.Fatalf("umoci %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("init", "--layout", img)
	run("new", "--image", img+":t")
	run("unpack", "--image", img+":t", bundle)
	rootfs := filepath.Join(bundle, "rootfs")
	mkdirs(t, filepath.Join(rootfs, "bin"))
	bb := filepath.Join(rootfs, "bin", "busybox")
	copyFile(t, busybox, bb, 0o755)
	for _, err := range []error{
		os.Symlink("busybox", filepath.Join(rootfs, "bin", "sh")),
		os.Link(bb, filepath.Join(rootfs, "bin", "bb2")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	run("repack", "--image", img+":t", bundle)
	if err := os.RemoveAll(bundle); err != nil {
		t.Fatal(err)
	}
	run("unpack", "--image", img+":t", bundle)
	if err := os.Remove(filepath.Join(rootfs, "bin", "bb2")); err != nil {
		t.Fatal(err)
	}
	run("repack", "--image", img+":t", bundle)

	layers := manifestLayers(t, img)
	if len(layers) != 2 {
		t.Fatalf("umoci wrote %d layers, want 2", len(layers))
	}
	c := openCache(t, t.TempDir(), CacheOptions{Unpack: UnpackOptions{UIDBase: 300000, GIDBase: 300000}})
	var dirs []string
	for _, l := range layers {
		if !strings.HasSuffix(l.MediaType, "+gzip") {
			t.Errorf("layer media type %s", l.MediaType)
		}
		blob := filepath.Join(img, "blobs", "sha256", strings.TrimPrefix(l.Digest, "sha256:"))
		d, release, err := c.Acquire(context.Background(), Blob{Digest: l.Digest, MediaType: l.MediaType, Open: func(context.Context) (io.ReadCloser, error) {
			return os.Open(blob)
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		dirs = append(dirs, d)
	}
	want, err := os.Stat(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.Stat(filepath.Join(dirs[0], "bin", "busybox")); err != nil || got.Size() != want.Size() || got.Mode().Perm() != 0o755 {
		t.Fatalf("unpacked busybox: %v, %v", got, err)
	}

	merged := t.TempDir()
	slices.Reverse(dirs) // overlay wants the top layer first
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, "ro,lowerdir="+strings.Join(dirs, ":")); err != nil {
		t.Skipf("cannot mount overlayfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	if _, err := os.Lstat(filepath.Join(merged, "bin", "bb2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bin/bb2, deleted by the second layer, is visible: %v", err)
	}
	out, err := exec.Command(filepath.Join(merged, "bin", "busybox"), "echo", "hello from the layer").Output()
	if err != nil || string(out) != "hello from the layer\n" {
		t.Errorf("busybox from the merged root: %q, %v", out, err)
	}
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

// manifestLayers reads the layers of the only image of an OCI layout.
func manifestLayers(tb testing.TB, layout string) []descriptor {
	tb.Helper()
	var index struct{ Manifests []descriptor }
	readJSON(tb, filepath.Join(layout, "index.json"), &index)
	if len(index.Manifests) != 1 {
		tb.Fatalf("%d manifests", len(index.Manifests))
	}
	var m struct{ Layers []descriptor }
	readJSON(tb, filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")), &m)
	return m.Layers
}

func readJSON(tb testing.TB, p string, v any) {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", p, err)
	}
}

func copyFile(tb testing.TB, src, dst string, perm os.FileMode) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, perm); err != nil {
		tb.Fatal(err)
	}
}
