package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec/layers"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// expand replaces each old token with its new value, in one pass.
func expand(b []byte, oldnew ...string) []byte {
	return []byte(strings.NewReplacer(oldnew...).Replace(string(b)))
}

// fuzzDirs are the directories one run of a target makes under top, and a
// sentinel file beside them that nothing may touch.
type fuzzDirs struct {
	top, layout, store, cache, outside string
}

func newFuzzDirs(tb testing.TB, top string) fuzzDirs {
	tb.Helper()
	d := fuzzDirs{
		top:     top,
		layout:  filepath.Join(top, "layout"),
		store:   filepath.Join(top, "store"),
		cache:   filepath.Join(top, "cache"),
		outside: filepath.Join(top, "outside"),
	}
	for _, p := range []string{d.layout, d.store, d.outside} {
		if err := os.Mkdir(p, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.outside, "sentinel"), []byte("untouched"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return d
}

// check asserts that top holds only the directories made for the run and
// the sentinel, unchanged (as exec/layers' assertOnlyLayerWritten does for
// one unpack).
func (d fuzzDirs) check(tb testing.TB) {
	tb.Helper()
	ents, err := os.ReadDir(d.top)
	if err != nil {
		tb.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if allowed := []string{"cache", "layout", "outside", "store"}; !isSubset(got, allowed) {
		tb.Errorf("%s holds %q, want only %q", d.top, got, allowed)
	}
	if ents, err := os.ReadDir(d.outside); err != nil || len(ents) != 1 || ents[0].Name() != "sentinel" {
		tb.Errorf("outside/ changed: %v, %v", ents, err)
	}
	p := filepath.Join(d.outside, "sentinel")
	if b, err := os.ReadFile(p); err != nil || string(b) != "untouched" {
		tb.Errorf("sentinel: %q, %v", b, err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		tb.Errorf("sentinel is no longer a plain 0644 file: %v, %v", fi, err)
	}
}

func isSubset(got, allowed []string) bool {
	for _, g := range got {
		if !slices.Contains(allowed, g) {
			return false
		}
	}
	return true
}

// absProbe is the absolute path the "absolute name" seeds write to.
const absProbe = "/e31-images-fuzz-probe"

// checkHost checks the places outside the test's directories that the
// hostile seeds aim at.
func checkHost(t *testing.T, passwd *syscall.Stat_t) {
	t.Helper()
	if _, err := os.Lstat(absProbe); err == nil {
		t.Errorf("%s was created", absProbe)
	}
	if after := lstatOf("/etc/passwd"); passwd != nil && (after == nil || after.Mtim != passwd.Mtim || after.Size != passwd.Size || after.Ino != passwd.Ino) {
		t.Errorf("/etc/passwd changed")
	}
}

func lstatOf(p string) *syscall.Stat_t {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil
	}
	return &st
}

func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("unpacking layers needs root (chown, mknod, trusted xattrs)")
	}
}

func openFuzzStore(tb testing.TB, dir string) *content.Store {
	tb.Helper()
	s, err := content.Open(context.Background(), dir, content.StoreOptions{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// maxLayerBytes caps what one fuzzed layer may unpack to.
const maxLayerBytes = 64 << 20

func openFuzzLibrary(tb testing.TB, s *content.Store, dir string) *Library {
	tb.Helper()
	lib, err := Open(context.Background(), s, dir, Options{
		// A few hundred bytes of sparse tar can claim gigabytes of
		// zeros, which an unpack writes out in full: e31d's cap is
		// 64 GiB (--max-layer-bytes), the test's disk budget smaller.
		MaxLayerBytes: maxLayerBytes,
		Log:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = lib.Close() })
	return lib
}

// How FuzzPrepare's sel presents the fuzzed layer: the low two bits pick
// the media type and whether the test compresses the bytes, the next bits
// add an honest layer below it or list it twice.
const (
	fuzzSelTar     = 0 // application/vnd.oci.image.layer.v1.tar, bytes as given
	fuzzSelGzipRaw = 1 // …tar+gzip, bytes as given (need not be gzip at all)
	fuzzSelGzipped = 2 // …tar+gzip, the bytes gzipped here, so mutations reach the tar inside
	fuzzSelZstdRaw = 3 // …tar+zstd, bytes as given

	fuzzSelBelow = 1 << 2 // an honest layer below the fuzzed one
	fuzzSelTwice = 1 << 3 // the fuzzed layer listed twice
)

// presentLayer returns the layer blobs to store and the manifest's layer
// descriptors and diff_ids for sel and the fuzzed bytes.
func presentLayer(tb testing.TB, sel byte, layer []byte) (blobs [][]byte, descs []v1.Descriptor, diffIDs []v1.Hash) {
	tb.Helper()
	add := func(mt types.MediaType, blob []byte) {
		if !slices.ContainsFunc(blobs, func(b []byte) bool { return bytes.Equal(b, blob) }) {
			blobs = append(blobs, blob)
		}
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: sha256Of(blob), Size: int64(len(blob))})
		diffIDs = append(diffIDs, diffIDOf(blob))
	}
	if sel&fuzzSelBelow != 0 {
		add(types.OCIUncompressedLayer, honestLayer(tb))
	}
	mt, blob := types.OCIUncompressedLayer, layer
	switch sel & 3 {
	case fuzzSelGzipRaw:
		mt = types.OCILayer
	case fuzzSelGzipped:
		mt, blob = types.OCILayer, gzipped(tb, layer)
	case fuzzSelZstdRaw:
		mt = types.OCILayerZStd
	}
	add(mt, blob)
	if sel&fuzzSelTwice != 0 {
		add(mt, blob)
	}
	return blobs, descs, diffIDs
}

// diffIDOf is the digest of the tar inside blob, or of blob itself where it
// does not decompress: what an honest config would state.
func diffIDOf(blob []byte) v1.Hash {
	rc, _, err := layers.Decompress(bytes.NewReader(blob), "")
	if err != nil {
		return sha256Of(blob)
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(rc, 64<<20)); err != nil {
		return sha256Of(blob)
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

func configJSON(tb testing.TB, diffIDs []v1.Hash) []byte {
	tb.Helper()
	return mustJSON(tb, v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: diffIDs},
		Config:       v1.Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}},
	})
}

func manifestJSON(tb testing.TB, config []byte, layers []v1.Descriptor) []byte {
	tb.Helper()
	return mustJSON(tb, v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Digest: sha256Of(config), Size: int64(len(config))},
		Layers:        layers,
	})
}

func indexJSON(tb testing.TB, manifest []byte) []byte {
	tb.Helper()
	return mustJSON(tb, v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1, Digest: sha256Of(manifest), Size: int64(len(manifest)),
		}},
	})
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeLayout writes an OCI image layout: oci-layout, index.json, and each
// blob under blobs/sha256/<hex> (one file for identical blobs).
func writeLayout(tb testing.TB, dir string, index []byte, blobs ...[]byte) {
	tb.Helper()
	bd := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(bd, 0o755); err != nil {
		tb.Fatal(err)
	}
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`))
	write(filepath.Join(dir, "index.json"), index)
	for _, b := range blobs {
		write(filepath.Join(bd, sha256Of(b).Hex), b)
	}
}

func sha256Of(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// tent is one entry of a test tar, as in exec/layers' tests.
type tent struct {
	name     string
	typ      byte
	body     string
	size     int64 // when set, the header claims this size and no body follows
	link     string
	mode     int64
	uid, gid int
}

func file(name, body string) tent {
	return tent{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func dir(name string) tent { return tent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) tent {
	return tent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) tent {
	return tent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

var tarTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// buildTar writes ents as a PAX tar. An entry with size set gets a header
// claiming it and no data, so the tar ends inside that entry.
func buildTar(tb testing.TB, ents ...tent) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: tarTime, Format: tar.FormatPAX,
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if e.size > 0 {
			hdr.Size = e.size
			if err := tw.WriteHeader(hdr); err != nil {
				tb.Fatalf("tar header %q: %v", e.name, err)
			}
			if err := tw.Flush(); err == nil {
				tb.Fatalf("tar entry %q: flush of a short entry passed", e.name)
			}
			return buf.Bytes() // what a writer cut off there would leave
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatalf("tar header %q: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// honestLayer has one of most things a real layer holds.
func honestLayer(tb testing.TB) []byte {
	tb.Helper()
	suid := file("usr/bin/su", "#!/bin/true\n")
	suid.mode = 0o4755
	owned := file("home/user/notes", "mine")
	owned.uid, owned.gid = 1000, 1001
	return buildTar(tb,
		dir("./"), dir("usr/"), dir("usr/bin/"),
		file("usr/bin/busybox", "ELF pretend"),
		suid,
		symlink("usr/bin/sh", "/usr/bin/busybox"),
		symlink("usr/bin/ls", "busybox"),
		hardlink("usr/bin/hardbox", "usr/bin/busybox"),
		owned,
		tent{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		file("etc/.wh.removed", ""),
		file("opt/.wh..wh..opq", ""),
		file("opt/new", "fresh"),
	)
}

type prepareSeed struct {
	name  string
	sel   byte
	layer []byte
}

// prepareSeeds are the hostile layers of exec/layers' hostile_test.go, with
// the outside directory named from where an unpack runs
// (cache/tmp/<digest>.<random>/rootfs, four levels below the test's top),
// and damaged streams, each plain and gzipped by the test; the honest
// layer in every presentation.
func prepareSeeds(tb testing.TB) []prepareSeed {
	tb.Helper()
	const out = "../../../../outside"
	one := func(e ...tent) []byte { return buildTar(tb, e...) }
	setuid := file("bin/su", "#!/bin/true\n")
	setuid.mode = 0o6755
	badOwner := file("f", "x")
	badOwner.uid = 65536
	longName := file(strings.Repeat("n/", 60)+strings.Repeat("x", 200), "long")
	good := honestLayer(tb)
	hostile := []prepareSeed{
		{name: "dotdot", layer: one(file("../x", "evil"))},
		{name: "dotdot-inside", layer: one(dir("a/"), file("a/../../outside/x", "evil"))},
		{name: "absolute", layer: one(file(absProbe, "evil"))},
		{name: "symlink-etc-then-write", layer: one(symlink("a", "/etc"), file("a/passwd", "root::0:0::/:/bin/sh\n"))},
		{name: "symlink-outside-then-write", layer: one(symlink("a", out), file("a/sentinel", "evil"))},
		{name: "symlink-dotdot-then-dir", layer: one(symlink("a", "../.."), dir("a/d/"), file("a/d/x", "evil"))},
		{name: "symlink-inside-then-through", layer: one(dir("d/"), symlink("s", "d"), file("s/x", "y"))},
		{name: "opaque-through-symlink", layer: one(symlink("a", out), file("a/.wh..wh..opq", ""))},
		{name: "whiteout-through-symlink", layer: one(symlink("a", out), file("a/.wh.sentinel", ""))},
		{name: "whiteout-dotdot", layer: one(file(".wh..", ""))},
		{name: "symlink-replacing-root", layer: one(symlink("./", "/"))},
		{name: "file-as-parent", layer: one(file("f", "x"), file("f/g", "y"))},
		{name: "hardlink-shadow", layer: one(hardlink("x", "/etc/shadow"))},
		{name: "hardlink-outside", layer: one(hardlink("x", out+"/sentinel"))},
		{name: "hardlink-missing", layer: one(hardlink("x", "nothere"))},
		{name: "hardlink-through-symlink", layer: one(symlink("s", out), hardlink("x", "s/sentinel"))},
		{name: "hardlink-dir", layer: one(dir("d/"), hardlink("x", "d"))},
		{name: "devices", layer: one(tent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660},
			tent{name: "dev/mem", typ: tar.TypeChar, mode: 0o660}, tent{name: "p", typ: tar.TypeFifo, mode: 0o600})},
		{name: "setuid", layer: one(dir("bin/"), setuid)},
		{name: "owner-outside-namespace", layer: one(badOwner)},
		{name: "long-name", layer: one(longName)},
		{name: "oversized-header", layer: one(tent{name: "big", typ: tar.TypeReg, size: 1 << 40, mode: 0o644})},
		{name: "claims-more-than-it-holds", layer: one(file("a", "x"), tent{name: "b", typ: tar.TypeReg, size: 1 << 20, mode: 0o644})},
	}
	var seeds []prepareSeed
	for _, s := range hostile {
		seeds = append(seeds, prepareSeed{s.name, fuzzSelTar, s.layer}, prepareSeed{s.name + "-gz", fuzzSelGzipped, s.layer})
	}
	seeds = append(seeds,
		prepareSeed{"not-a-tar", fuzzSelTar, []byte("this is not a tar, only text\n")},
		prepareSeed{"empty", fuzzSelTar, nil},
		prepareSeed{"truncated", fuzzSelTar, good[:len(good)/2]},
		prepareSeed{"truncated-gz", fuzzSelGzipped, good[:len(good)/2]},
		prepareSeed{"gzip-header-then-garbage", fuzzSelGzipRaw, append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, "garbage garbage"...)},
		prepareSeed{"gzip-cut", fuzzSelGzipRaw, gzipped(tb, good)[:40]},
		prepareSeed{"zstd-magic-then-garbage", fuzzSelZstdRaw, append([]byte{0x28, 0xb5, 0x2f, 0xfd}, "garbage"...)},
		prepareSeed{"plain-tar-labelled-gzip", fuzzSelGzipRaw, good},
		prepareSeed{"trailing-garbage", fuzzSelTar, append(slices.Clone(good), "garbage after the end"...)},
	)
	for _, sel := range []byte{fuzzSelTar, fuzzSelGzipped, fuzzSelTar | fuzzSelBelow, fuzzSelGzipped | fuzzSelTwice} {
		seeds = append(seeds, prepareSeed{fmt.Sprintf("honest-%d", sel), sel, good})
	}
	// A failing layer above an honest one: the honest one, acquired
	// first, must be released by Prepare's error path.
	seeds = append(seeds, prepareSeed{"honest-then-escape", fuzzSelTar | fuzzSelBelow, hostile[4].layer})
	return seeds
}
