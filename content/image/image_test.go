package image

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/testnet/imagebuild"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func openStore(tb testing.TB) *content.Store {
	tb.Helper()
	s, err := content.Open(context.Background(), tb.TempDir(), content.StoreOptions{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// platformImage is a random image whose config states a platform.
func platformImage(t testing.TB, p v1.Platform, size, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(size, layers)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config.Entrypoint = []string{"/bin/sh", "-c"}
	cf.Config.Env = []string{"PATH=/bin"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var here = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

func writeLayout(t testing.TB, dir string, imgs ...v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if err := p.AppendImage(img); err != nil {
			t.Fatal(err)
		}
	}
}

// writeOCIArchive writes img as an OCI layout at dir/layout and as the tar
// of that layout at dir/oci.tar, which is what an oci-archive is.
func writeOCIArchive(t testing.TB, dir string, img v1.Image) (layoutDir, archive string) {
	t.Helper()
	layoutDir, archive = filepath.Join(dir, "layout"), filepath.Join(dir, "oci.tar")
	writeLayout(t, layoutDir, img)
	if err := imagebuild.TarDir(layoutDir, archive); err != nil {
		t.Fatal(err)
	}
	return layoutDir, archive
}

// checkImage loads root and reads every layer through OpenLayer, checking
// the result against img.
func checkImage(t *testing.T, s *content.Store, rec Record, img v1.Image) *Image {
	t.Helper()
	ctx := context.Background()
	im, err := Load(ctx, s, rec.CID)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if im.Digest != d || rec.Digest != d.String() {
		t.Errorf("digest: loaded %s, record %s, want %s", im.Digest, rec.Digest, d)
	}
	layers, _ := img.Layers()
	if len(im.Layers) != len(layers) || rec.Layers != len(layers) {
		t.Fatalf("%d layers loaded, record %d, want %d", len(im.Layers), rec.Layers, len(layers))
	}
	for i, l := range im.Layers {
		want, _ := layers[i].Digest()
		diff, _ := layers[i].DiffID()
		if l.Digest != want || l.DiffID != diff {
			t.Errorf("layer %d: %s/%s, want %s/%s", i, l.Digest, l.DiffID, want, diff)
		}
		r, err := OpenLayer(ctx, s, l)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, r)
		r.Close()
		if err != nil || n != l.Size {
			t.Fatalf("layer %d: read %d of %d bytes: %v", i, n, l.Size, err)
		}
	}
	return im
}

func TestImportLayoutAndArchive(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	img := platformImage(t, here, 3<<20, 3)
	dir := t.TempDir()
	writeLayout(t, dir, img)

	rec, err := Import(ctx, s, Ref{Transport: OCI, Path: dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	im := checkImage(t, s, rec, img)
	if strings.Join(im.Config.Entrypoint, " ") != "/bin/sh -c" || im.Config.Env[0] != "PATH=/bin" {
		t.Errorf("config: %+v", im.Config)
	}
	if rec.Platform != here.String() || rec.Pinned != "" {
		t.Errorf("record: %+v", rec)
	}

	list, err := List(ctx, s)
	if err != nil || len(list) != 1 || list[0].CID != rec.CID || list[0].Ref != "oci:"+dir || list[0].Size != rec.Size {
		t.Fatalf("list: %+v, %v", list, err)
	}
	// Importing a CID checks the image and pins it again.
	again, err := Import(ctx, s, Ref{Transport: CID, Root: rec.CID}, Options{})
	if err != nil || again.CID != rec.CID || again.Digest != rec.Digest {
		t.Fatalf("import by CID: %+v, %v", again, err)
	}
	if err := Remove(ctx, s, rec.CID); err != nil {
		t.Fatal(err)
	}
	if list, err := List(ctx, s); err != nil || len(list) != 0 {
		t.Fatalf("list after remove: %+v, %v", list, err)
	}
	if err := Remove(ctx, s, rec.CID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
}

func TestNoPlatform(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	arm := v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	z := v1.Platform{OS: "linux", Architecture: "s390x"}
	if runtime.GOARCH == "arm64" || runtime.GOARCH == "s390x" {
		arm.Architecture, z.Architecture = "riscv64", "ppc64le"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: platformImage(t, arm, 1024, 1), Descriptor: v1.Descriptor{Platform: &arm}},
		mutate.IndexAddendum{Add: platformImage(t, z, 1024, 1), Descriptor: v1.Descriptor{Platform: &z}},
	)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	_, err = Import(ctx, s, Ref{Transport: OCI, Path: dir}, Options{})
	if !errors.Is(err, ErrNoPlatform) || !strings.Contains(err.Error(), arm.String()) || !strings.Contains(err.Error(), z.String()) {
		t.Fatalf("got %v, want ErrNoPlatform naming %s and %s", err, arm, z)
	}
	// The same index does have the other platforms.
	rec, err := Import(ctx, s, Ref{Transport: OCI, Path: dir}, Options{Platform: z})
	if err != nil || rec.Platform != z.String() {
		t.Fatalf("import for %s: %+v, %v", z, rec, err)
	}

	// A single image for another platform, with no index around it, is
	// refused by its config.
	dir2 := t.TempDir()
	writeLayout(t, dir2, platformImage(t, arm, 1024, 1))
	if _, err := Import(ctx, s, Ref{Transport: OCI, Path: dir2}, Options{}); !errors.Is(err, ErrNoPlatform) {
		t.Fatalf("single foreign image: %v", err)
	}
}

// TestSharedLayerStoredOnce: the second of two images sharing a base
// layer adds only its own layer to the store.
func TestSharedLayerStoredOnce(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	base, err := random.Layer(4<<20, types.OCIUncompressedLayer)
	if err != nil {
		t.Fatal(err)
	}
	mk := func() v1.Image {
		top, err := random.Layer(1<<20, types.OCIUncompressedLayer)
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(platformImage(t, here, 0, 0), base, top)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	a, b := mk(), mk()
	da, db := t.TempDir(), t.TempDir()
	writeLayout(t, da, a)
	writeLayout(t, db, b)

	ra, err := Import(ctx, s, Ref{Transport: OCI, Path: da}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	u1, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Import(ctx, s, Ref{Transport: OCI, Path: db}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	u2, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	baseSize, _ := base.Size()
	sizeB, err := s.Size(ctx, rb.CID)
	if err != nil {
		t.Fatal(err)
	}
	added := u2.Bytes - u1.Bytes
	t.Logf("image a %d bytes; b %d bytes in its DAG, added %d; shared layer %d", u1.Bytes, sizeB, added, baseSize)
	if ra.CID == rb.CID || added > sizeB-baseSize {
		t.Fatalf("second image added %d bytes; its DAG is %d with a %d-byte shared layer", added, sizeB, baseSize)
	}
	checkImage(t, s, rb, b)
}

// registryServer serves a registry on 127.0.0.1. corrupt, if set, names a
// blob digest whose bytes it serves with one byte flipped.
func registryServer(t *testing.T, corrupt *v1.Hash) string {
	t.Helper()
	reg := registry.New(registry.Logger(nopLogger()))
	h := http.Handler(reg)
	if corrupt != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+corrupt.String()) {
				reg.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if len(b) > 0 {
				b[len(b)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(b)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	host := registryServer(t, nil)
	img := platformImage(t, here, 2<<20, 2)
	tag, err := name.NewTag(host + "/team/trainer:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	s := openStore(t)

	ref, err := ParseRef("docker://" + tag.String())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Import(ctx, s, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantPinned := "docker://" + host + "/team/trainer@" + d.String()
	if rec.Pinned != wantPinned || rec.Ref != "docker://"+tag.String() {
		t.Fatalf("record %+v, want pinned %s", rec, wantPinned)
	}
	checkImage(t, s, rec, img)

	// By digest, and through Pull into another store: the same DAG.
	byDigest, err := ParseRef(wantPinned)
	if err != nil {
		t.Fatal(err)
	}
	rec2, err := Import(ctx, s, byDigest, Options{})
	if err != nil || rec2.CID != rec.CID {
		t.Fatalf("by digest: %+v, %v; want CID %s", rec2, err, rec.CID)
	}
	s2 := openStore(t)
	c, err := Pull(ctx, s2, rec.Pinned, Options{})
	if err != nil || c != rec.CID {
		t.Fatalf("pull: %s, %v; want %s", c, err, rec.CID)
	}
	if _, err := Pull(ctx, s2, "docker://"+tag.String(), Options{}); !errors.Is(err, ErrNotPinned) {
		t.Fatalf("pull by tag: %v, want ErrNotPinned", err)
	}

	// The same image in a layout has the same CID as from the registry.
	dir := t.TempDir()
	writeLayout(t, dir, img)
	rec3, err := Import(ctx, s2, Ref{Transport: OCI, Path: dir}, Options{})
	if err != nil || rec3.CID != rec.CID {
		t.Fatalf("from a layout: %s, %v; want %s", rec3.CID, err, rec.CID)
	}

	// A multi-platform index by tag: pinned to the manifest for here.
	other := v1.Platform{OS: "linux", Architecture: "s390x"}
	if runtime.GOARCH == "s390x" {
		other.Architecture = "arm64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: platformImage(t, other, 1024, 1), Descriptor: v1.Descriptor{Platform: &other}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &here}},
	)
	itag, _ := name.NewTag(host + "/team/multi:latest")
	if err := remote.WriteIndex(itag, idx); err != nil {
		t.Fatal(err)
	}
	rec4, err := Import(ctx, s, Ref{Transport: Docker, Name: itag}, Options{})
	if err != nil || rec4.CID != rec.CID || !strings.HasSuffix(rec4.Pinned, "/team/multi@"+d.String()) {
		t.Fatalf("from an index: %+v, %v", rec4, err)
	}
	list, err := List(ctx, s)
	if err != nil || len(list) != 1 || list[0].CID != rec.CID || !strings.HasSuffix(list[0].Pinned, "@"+d.String()) || !strings.HasPrefix(list[0].Pinned, "docker://"+host+"/team/") {
		t.Fatalf("list: %+v, %v", list, err)
	}
}

func TestRegistryCorruptBlob(t *testing.T) {
	ctx := context.Background()
	img := platformImage(t, here, 2<<20, 2)
	layers, _ := img.Layers()
	bad, _ := layers[1].Digest()
	host := registryServer(t, &bad)
	tag, _ := name.NewTag(host + "/team/trainer:v1")
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	_, err := Import(ctx, s, Ref{Transport: Docker, Name: tag}, Options{})
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), bad.String()) {
		t.Fatalf("got %v, want ErrDigestMismatch naming %s", err, bad)
	}
	if pins, err := s.Pins(ctx); err != nil || len(pins) != 0 {
		t.Fatalf("pins after a refused import: %v, %v", pins, err)
	}
}

// TestOpenLayerChecks: a DAG whose layer blob does not hold the layer's
// bytes (a lying peer) loads, since sizes match, but reading the layer
// ends in ErrDigestMismatch.
func TestOpenLayerChecks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	img := platformImage(t, here, 1<<20, 1)
	dir := t.TempDir()
	writeLayout(t, dir, img)
	rec, err := Import(ctx, s, Ref{Transport: OCI, Path: dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load(ctx, s, rec.CID)
	if err != nil {
		t.Fatal(err)
	}
	// Rebuild the same tree with the layer's bytes flipped.
	var files []content.TreeFile
	add := func(p string, b []byte) {
		files = append(files, content.TreeFile{Path: p, Size: int64(len(b)), Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}})
	}
	read := func(p string) []byte {
		c, err := s.Resolve(ctx, rec.CID, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Open(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	add("oci-layout", read("oci-layout"))
	add("index.json", read("index.json"))
	add(blobPath(im.Digest), im.RawManifest)
	cd, _ := img.ConfigName()
	add(blobPath(cd), im.RawConfig)
	l := im.Layers[0]
	layer := read(blobPath(l.Digest))
	layer[0] ^= 1
	add(blobPath(l.Digest), layer)
	root, _, err := s.ImportTree(ctx, files, content.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := Load(ctx, s, root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenLayer(ctx, s, bad.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("reading a tampered layer: %v, want ErrDigestMismatch", err)
	}

	// A manifest that does not hash to its name fails Load itself.
	files[2] = content.TreeFile{Path: blobPath(im.Digest), Size: int64(len(im.RawManifest)), Open: func(context.Context) (io.ReadCloser, error) {
		m := bytes.Clone(im.RawManifest)
		m[len(m)-2] ^= 1
		return io.NopCloser(bytes.NewReader(m)), nil
	}}
	root, _, err = s.ImportTree(ctx, files, content.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, s, root); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered manifest: %v, want ErrDigestMismatch", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Ref
	}{
		{"oci:./dir", Ref{Transport: OCI, Path: "./dir"}},
		{"oci:/a/b:v1", Ref{Transport: OCI, Path: "/a/b", Tag: "v1"}},
		{"oci-archive:x.tar:latest", Ref{Transport: OCIArchive, Path: "x.tar", Tag: "latest"}},
		{"docker-archive:x.tar", Ref{Transport: DockerArchive, Path: "x.tar"}},
		{"docker-archive:x.tar:busybox:1", Ref{Transport: DockerArchive, Path: "x.tar", Tag: "busybox:1"}},
	} {
		got, err := ParseRef(c.in)
		if err != nil || got != c.want || got.String() != c.in {
			t.Errorf("%q: %+v (%q), %v; want %+v", c.in, got, got.String(), err, c.want)
		}
	}
	r, err := ParseRef("docker://busybox")
	if err != nil || r.Transport != Docker || r.Name.Name() != "index.docker.io/library/busybox:latest" || r.Pinned() {
		t.Errorf("docker://busybox: %+v, %v", r, err)
	}
	pinned := "docker://127.0.0.1:5000/a/b@sha256:" + strings.Repeat("0", 64)
	r, err = ParseRef(pinned)
	if err != nil || !r.Pinned() || r.String() != pinned {
		t.Errorf("%s: %+v, %v", pinned, r, err)
	}
	for _, bad := range []string{"", "oci:", "oci:x:", "docker://", "docker://UP", "docker://a@sha512:" + strings.Repeat("0", 128),
		"dir:/x", "./x", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy" /* raw, not a directory */} {
		if _, err := ParseRef(bad); !errors.Is(err, ErrBadRef) {
			t.Errorf("%q: %v, want ErrBadRef", bad, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"oci:./dir:tag", "oci-archive:/x.tar", "docker-archive:x.tar:a:b", "docker://busybox",
		"docker://127.0.0.1:5000/a/b:t@sha256:" + strings.Repeat("a", 64), "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "oci:", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrBadRef) {
				t.Fatalf("%q: error %v is not ErrBadRef", s, err)
			}
			return
		}
		// What ParseRef accepts prints back to something that parses to
		// the same reference.
		again, err := ParseRef(r.String())
		if err != nil {
			t.Fatalf("%q -> %q does not parse: %v", s, r.String(), err)
		}
		if again.String() != r.String() {
			t.Fatalf("%q -> %q -> %q", s, r.String(), again.String())
		}
	})
}
