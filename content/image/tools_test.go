package image

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/testnet/imagebuild"
)

// needTools returns the paths of the named programs. Where one is missing
// the test is skipped, unless E31_REQUIRE_RUNC is set (CI), where a
// missing tool must fail the run rather than pass it by skipping.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("E31_REQUIRE_RUNC") != "" {
				t.Fatalf("%s is missing and E31_REQUIRE_RUNC is set: install it (.ci/deps)", n)
			}
			t.Skipf("%s is missing", n)
		}
	}
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// buildBusyboxImage builds a two-layer image with umoci in dir/layout,
// tagged v1: the first layer has /bin/busybox, symlinks to it and a file
// bin/gone.txt; the second deletes gone.txt (a whiteout) and adds bin/tool
// and bin/tool-link, a hard link to it.
func buildBusyboxImage(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	b, err := imagebuild.New(ctx, dir, "v1")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Layer(ctx, imagebuild.WithGone("sh", "ls", "cat"))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Config(ctx, "--config.entrypoint", "/bin/sh", "--config.cmd=-c", "--config.cmd=ls /bin",
		"--config.workingdir", "/work", "--config.env", "E31=1")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Layer(ctx, imagebuild.DeleteAndLink)
	if err != nil {
		t.Fatal(err)
	}
}

// tarDir writes the tree at dir as a tar file, the way an oci-archive is
// a tar of a layout.
func tarDir(t *testing.T, dir, out string) {
	t.Helper()
	if err := imagebuild.TarDir(dir, out); err != nil {
		t.Fatal(err)
	}
}

func TestImportRealTools(t *testing.T) {
	needTools(t, "umoci", "skopeo", "busybox")
	ctx := context.Background()
	dir := t.TempDir()
	buildBusyboxImage(t, dir)
	layoutDir := filepath.Join(dir, "layout")
	tarDir(t, layoutDir, filepath.Join(dir, "oci.tar"))
	run(t, dir, "skopeo", "--insecure-policy", "copy", "oci:layout:v1", "docker-archive:docker.tar:e31/busybox:v1")

	s := openStore(t)
	fromDir, err := Import(ctx, s, Ref{Transport: OCI, Path: layoutDir, Tag: "v1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := Import(ctx, s, Ref{Transport: OCIArchive, Path: filepath.Join(dir, "oci.tar")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fromTar.CID != fromDir.CID || fromTar.Digest != fromDir.Digest {
		t.Fatalf("oci-archive gave %s (%s), the layout %s (%s)", fromTar.CID, fromTar.Digest, fromDir.CID, fromDir.Digest)
	}
	if _, err := Import(ctx, s, Ref{Transport: OCI, Path: layoutDir, Tag: "v2"}, Options{}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "v1") {
		t.Errorf("missing tag: %v, want ErrNotFound listing v1", err)
	}
	ref, err := ParseRef("docker-archive:" + filepath.Join(dir, "docker.tar") + ":e31/busybox:v1")
	if err != nil {
		t.Fatal(err)
	}
	fromDocker, err := Import(ctx, s, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// docker save | gzip, which docker load and skopeo take as it is.
	run(t, dir, "gzip", "-k", "docker.tar")
	fromGzip, err := Import(ctx, s, Ref{Transport: DockerArchive, Path: filepath.Join(dir, "docker.tar.gz"), Tag: "e31/busybox:v1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fromGzip.CID != fromDocker.CID {
		t.Errorf("the gzipped docker archive gave %s, the plain one %s", fromGzip.CID, fromDocker.CID)
	}

	oci, err := Load(ctx, s, fromDir.CID)
	if err != nil {
		t.Fatal(err)
	}
	docker, err := Load(ctx, s, fromDocker.CID)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range []*Image{oci, docker} {
		c := im.Config
		if !slices.Equal(c.Entrypoint, []string{"/bin/sh"}) || !slices.Equal(c.Cmd, []string{"-c", "ls /bin"}) ||
			c.WorkingDir != "/work" || !slices.Contains(c.Env, "E31=1") {
			t.Errorf("config of %s: %+v", im.Root, c)
		}
		if len(im.Layers) != 2 {
			t.Fatalf("%s has %d layers, want 2", im.Root, len(im.Layers))
		}
	}
	// docker save keeps layers as plain tars: their digests are the OCI
	// image's diff_ids, and the bytes unpack to the same entries.
	for i := range 2 {
		if docker.Layers[i].DiffID != oci.Layers[i].DiffID || docker.Layers[i].Digest != oci.Layers[i].DiffID {
			t.Errorf("layer %d: docker %s/%s, oci diff_id %s", i, docker.Layers[i].Digest, docker.Layers[i].DiffID, oci.Layers[i].DiffID)
		}
		if oci.Layers[i].Compression() != "gzip" || docker.Layers[i].Compression() != "" {
			t.Errorf("layer %d: compression %q and %q", i, oci.Layers[i].Compression(), docker.Layers[i].Compression())
		}
	}
	for _, im := range []*Image{oci, docker} {
		top := readLayer(t, s, im.Layers[1])
		if h := top["bin/.wh.gone.txt"]; h == nil {
			t.Errorf("%s: the second layer has no whiteout for bin/gone.txt: %v", im.Root, slices.Sorted(mapKeys(top)))
		}
		if h := top["bin/tool-link"]; h == nil || h.Typeflag != tar.TypeLink || strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "/"), "./") != "bin/tool" {
			t.Errorf("%s: bin/tool-link is %+v, want a hard link to bin/tool", im.Root, h)
		}
		base := readLayer(t, s, im.Layers[0])
		if h := base["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("%s: bin/sh is %+v, want a symlink to busybox", im.Root, h)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// readLayer reads a whole layer through OpenLayer (so its digest is
// checked) and returns its headers by clean name.
func readLayer(t *testing.T, s *content.Store, l Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := OpenLayer(context.Background(), s, l)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var r io.Reader = rc
	if l.Compression() == "gzip" {
		zr, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	out := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
	}
	// Drain to EOF so that the digest check runs.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	return out
}
