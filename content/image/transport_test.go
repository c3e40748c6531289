package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An image named with a transport that cannot fit what is at its path is
// refused with the transport that does: the archive of one kind named as
// the other, a folder as an archive, an archive as a folder.
func TestWrongTransportNamesTheRightOne(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	dir := t.TempDir()
	layout, ociTar := writeOCIArchive(t, dir, platformImage(t, here, 1<<10, 1))
	// What docker save wrote before Docker 25: manifest.json, no index.json.
	dockerTar := filepath.Join(dir, "docker.tar")
	f, err := os.Create(dockerTar)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	manifest := []byte(`[{"Config":"c.json","RepoTags":["x:1"],"Layers":[]}]`)
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(manifest); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{Transport: DockerArchive, Path: ociTar}, "name it oci-archive:" + ociTar},
		{Ref{Transport: OCIArchive, Path: dockerTar}, "name it docker-archive:" + dockerTar},
		{Ref{Transport: OCIArchive, Path: layout}, "name an OCI layout folder oci:" + layout},
		{Ref{Transport: DockerArchive, Path: layout}, "name an OCI layout folder oci:" + layout},
		{Ref{Transport: OCI, Path: ociTar}, "name an archive oci-archive:" + ociTar},
	} {
		_, err := Import(ctx, s, tc.ref, Options{})
		if !errors.Is(err, ErrBadRef) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadRef saying %q", tc.ref, err, tc.want)
		}
	}
	// The right transport still imports it.
	if _, err := Import(ctx, s, Ref{Transport: OCIArchive, Path: ociTar}, Options{}); err != nil {
		t.Fatal(err)
	}
}
