package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/layers"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/ipfs/go-cid"
	"github.com/klauspost/compress/gzip"
)

// The targets here drive what a job brings to a provider through the calls
// e31d makes with it: an OCI layout becomes one DAG in a real store
// (image.Import, or content.Store.Import of the same folder, which is how a
// hostile submitter's DAG looks once fetched), image.Load reads it back,
// and Library.Prepare unpacks its layers into a real layer cache. Whatever
// the bytes, nothing may panic, nothing may be written outside the
// directories the test made, and no layer may stay acquired after an
// error or a release.

// FuzzPrepare feeds arbitrary layer bytes to Prepare inside an image that is
// otherwise well formed: the manifest's descriptor and the config's diff_id
// are computed from the bytes, so Import and Load must accept it and the
// layer is what is under test. sel picks how the layer is presented
// (fuzzSel*).
func FuzzPrepare(f *testing.F) {
	requireRoot(f)
	for _, s := range prepareSeeds(f) {
		f.Add(s.sel, s.layer)
	}
	passwd := lstatOf("/etc/passwd")
	f.Fuzz(func(t *testing.T, sel byte, layer []byte) {
		ctx := context.Background()
		top := t.TempDir()
		dirs := newFuzzDirs(t, top)
		store := openFuzzStore(t, dirs.store)

		blobs, descs, diffIDs := presentLayer(t, sel, layer)
		config := configJSON(t, diffIDs)
		manifest := manifestJSON(t, config, descs)
		writeLayout(t, dirs.layout, indexJSON(t, manifest), append([][]byte{manifest, config}, blobs...)...)

		rec, err := image.Import(ctx, store, image.Ref{Transport: image.OCI, Path: dirs.layout}, image.Options{})
		if err != nil {
			t.Fatalf("import of a well-formed image: %v", err)
		}
		im, err := image.Load(ctx, store, rec.CID)
		if err != nil {
			t.Fatalf("load of an imported image: %v", err)
		}
		if len(im.Layers) != len(descs) {
			t.Fatalf("loaded %d layers, the manifest has %d", len(im.Layers), len(descs))
		}

		lib := openFuzzLibrary(t, store, dirs.cache)
		first := prepareOnce(t, lib, rec.CID, dirs)
		// Once more, now that the cache has seen the layers: a layer that
		// unpacked is checked and served from the cache, one that failed
		// must fail again rather than be served half-unpacked.
		second := prepareOnce(t, lib, rec.CID, dirs)
		if (first == nil) != (second == nil) {
			t.Errorf("Prepare gave %v, then %v", first, second)
		}
		dirs.check(t)
		checkHost(t, passwd)
	})
}

// prepareOnce calls Prepare, checks what it returned, releases, and checks
// that nothing is held after.
func prepareOnce(t *testing.T, lib *Library, root cid.Cid, dirs fuzzDirs) error {
	t.Helper()
	ir, release, err := lib.Prepare(context.Background(), root)
	t.Logf("prepare: %v", err)
	if err != nil {
		if ir != nil || release != nil {
			t.Errorf("Prepare failed (%v) and returned an image root or a release", err)
		}
		// The store and the disk are healthy here, so any failure is the
		// layer's: the provider must be able to tell it from its own.
		if !Refused(err) {
			t.Errorf("Prepare's error is not a refusal of the image: %v", err)
		}
	} else {
		checkImageRoot(t, ir, dirs.cache)
		if st := lib.Stats(); st.InUse == 0 {
			t.Errorf("Prepare succeeded with no layer in use: %+v", st)
		}
		release()
		release() // twice is harmless
	}
	if st := lib.Stats(); st.InUse != 0 || st.InUseBytes != 0 {
		t.Errorf("after Prepare (err %v) and release, layers still in use: %+v", err, st)
	}
	// Unpacks in progress and removals live in tmp/; each removes its
	// own before Acquire returns.
	if left, _ := os.ReadDir(filepath.Join(dirs.cache, "tmp")); len(left) > 0 {
		t.Errorf("layer cache tmp/ holds %d entries after Prepare (err %v), first %s", len(left), err, left[0].Name())
	}
	return err
}

// checkImageRoot checks that every layer directory lies in the cache and
// holds only what an overlay lower layer may: directories, regular files,
// symlinks and 0/0 character devices (whiteouts), all owned inside the
// image's id range, so that no file of a job's image belongs to a host
// user.
func checkImageRoot(t *testing.T, ir *exec.ImageRoot, cacheDir string) {
	t.Helper()
	if ir == nil {
		t.Fatal("Prepare succeeded without an image root")
	}
	for _, dir := range ir.Layers {
		if rel, err := filepath.Rel(cacheDir, dir); err != nil || !filepath.IsLocal(rel) {
			t.Errorf("layer directory %s is not inside the cache %s", dir, cacheDir)
			continue
		}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			base := exec.DefaultUIDBase
			if st.Uid < base || st.Uid >= base+65536 || st.Gid < base || st.Gid >= base+65536 {
				t.Errorf("%s is owned by %d:%d, outside %d..%d", p, st.Uid, st.Gid, base, base+65535)
			}
			switch m := fi.Mode(); {
			case m.IsDir(), m.IsRegular(), m&fs.ModeSymlink != 0:
			case m&fs.ModeCharDevice != 0 && st.Rdev == 0:
			default:
				t.Errorf("%s has mode %v (rdev %d), which a layer must not hold", p, m, st.Rdev)
			}
			return nil
		})
		if err != nil {
			t.Errorf("walk layer %s: %v", dir, err)
		}
	}
}

// FuzzLoad fuzzes the image's own JSON around a valid one-layer image:
// index.json, the manifest and the config come from the fuzzer, and every
// blob is stored under its real digest. So that mutations can still name
// the blobs, these tokens in the fuzzed bytes are replaced before the
// files are written: @L the layer's digest, @l its size, @D its diff_id;
// @C the config's digest and @c its size (in the manifest and index); @M
// the manifest's digest and @m its size (in the index).
//
// The folder goes through image.Import, and also straight into the store as
// a plain UnixFS directory (what a hostile submitter can make a provider
// fetch), whose root is then Loaded and Prepared. What Import accepts must
// Load and Prepare; every refusal must wrap a sentinel error.
func FuzzLoad(f *testing.F) {
	layer := buildTar(f, file("etc/motd", "hello\n"), dir("tmp/"))
	for _, s := range loadSeeds() {
		f.Add([]byte(s.index), []byte(s.manifest), []byte(s.config))
	}
	root := os.Geteuid() == 0
	f.Fuzz(func(t *testing.T, index, manifest, config []byte) {
		ctx := context.Background()
		top := t.TempDir()
		dirs := newFuzzDirs(t, top)
		store := openFuzzStore(t, dirs.store)

		ld, dd := sha256Of(layer), sha256Of(layer) // a plain tar: digest = diff_id
		config = expand(config, "@L", ld.String(), "@l", strconv.Itoa(len(layer)), "@D", dd.String())
		cd := sha256Of(config)
		manifest = expand(manifest, "@L", ld.String(), "@l", strconv.Itoa(len(layer)), "@D", dd.String(),
			"@C", cd.String(), "@c", strconv.Itoa(len(config)))
		md := sha256Of(manifest)
		index = expand(index, "@L", ld.String(), "@l", strconv.Itoa(len(layer)), "@D", dd.String(),
			"@C", cd.String(), "@c", strconv.Itoa(len(config)), "@M", md.String(), "@m", strconv.Itoa(len(manifest)))
		writeLayout(t, dirs.layout, index, manifest, config, layer)

		var lib *Library
		if root {
			lib = openFuzzLibrary(t, store, dirs.cache)
		}
		rec, err := image.Import(ctx, store, image.Ref{Transport: image.OCI, Path: dirs.layout}, image.Options{})
		if err != nil {
			wantSentinel(t, "import", err)
		} else {
			im, err := image.Load(ctx, store, rec.CID)
			if err != nil {
				t.Fatalf("Import accepted the image, Load refuses it: %v", err)
			}
			if lib != nil {
				// Import checks blobs against their digests, not what
				// a layer holds: only an image whose every layer is the
				// valid one must Prepare.
				honest := !slices.ContainsFunc(im.Layers, func(l image.Layer) bool { return l.Digest != ld })
				if _, release, err := lib.Prepare(ctx, rec.CID); err == nil {
					release()
				} else if honest {
					t.Errorf("Import accepted the image, Prepare refuses it: %v", err)
				} else {
					wantSentinel(t, "prepare", err)
				}
			}
		}

		// The same folder as any input: Load must do all the checking.
		raw, _, err := store.Import(ctx, dirs.layout, content.ImportOptions{})
		if err != nil {
			t.Fatalf("import of the layout folder as plain files: %v", err)
		}
		if _, err := image.Load(ctx, store, raw); err != nil {
			wantSentinel(t, "load", err)
		} else if lib != nil {
			if _, release, err := lib.Prepare(ctx, raw); err != nil {
				wantSentinel(t, "prepare", err)
			} else {
				release()
			}
		}
		if lib != nil {
			if st := lib.Stats(); st.InUse != 0 {
				t.Errorf("layers still in use after every release: %+v", st)
			}
		}
		dirs.check(t)
	})
}

// sentinels are the errors a refusal of a hostile image may wrap: callers
// branch on them, so an error that wraps none of them is reported.
var sentinels = []error{
	image.ErrInvalid, image.ErrDigestMismatch, image.ErrNoPlatform, image.ErrNotFound,
	image.ErrAmbiguous, image.ErrBadRef,
	content.ErrIncomplete, content.ErrNotFound, content.ErrInvalidData, content.ErrUnsupported,
	content.ErrUnsafeName, content.ErrTooLarge,
	layers.ErrBadDigest, layers.ErrDigestMismatch, layers.ErrMalformed, layers.ErrMediaType,
	layers.ErrUnsafePath, layers.ErrBadLink, layers.ErrTooLarge, layers.ErrBadOwner, layers.ErrUnsupported,
	// A layout folder is local files: a blob that is not there is the
	// file system's own sentinel.
	fs.ErrNotExist,
}

func wantSentinel(t *testing.T, what string, err error) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Errorf("%s: error wraps no sentinel: %v (%T)", what, err, err)
}

type loadSeed struct{ index, manifest, config string }

// loadSeeds are index, manifest and config JSON with the tokens of FuzzLoad:
// a valid image first, then the ways a peer's image can be wrong.
func loadSeeds() []loadSeed {
	const (
		index    = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@M","size":@m}]}`
		manifest = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"@C","size":@c},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"@L","size":@l}]}`
		config   = `{"architecture":"` + runtime.GOARCH + `","os":"linux","rootfs":{"type":"layers","diff_ids":["@D"]},"config":{"Entrypoint":["/bin/sh"],"Env":["PATH=/bin"]}}`
	)
	r := strings.NewReplacer
	return []loadSeed{
		{index, manifest, config},
		// Two manifests in the index, the same one twice, none.
		{r(`}]}`, `},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@C","size":@c}]}`).Replace(index), manifest, config},
		{r(`}]}`, `},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@M","size":@m}]}`).Replace(index), manifest, config},
		{`{"schemaVersion":2,"manifests":[]}`, manifest, config},
		// A nested index pointing at itself is impossible by hash, so at
		// the manifest under an index media type.
		{r("manifest.v1", "index.v1").Replace(index), manifest, config},
		// Sizes that lie: negative, huge, one off.
		{r("@m", "-1").Replace(index), manifest, config},
		{r("@m", "99999999999999").Replace(index), manifest, config},
		{index, r("@l", "1").Replace(manifest), config},
		{index, r("@c", "-5").Replace(manifest), config},
		// Digests that are not sha256 or not lower case.
		{r("@M", "sha512:00").Replace(index), manifest, config},
		{index, r(`"@L"`, `"sha256:`+strings.Repeat("A", 64)+`"`).Replace(manifest), config},
		{index, r(`"@L"`, `"sha256:../../../etc/passwd"`).Replace(manifest), config},
		// The config is the layer, the layer is the config.
		{index, r("@C", "@L", "@c", "@l").Replace(manifest), config},
		{index, r("@L", "@C", "@l", "@c").Replace(manifest), config},
		// diff_ids that do not fit the layers.
		{index, manifest, r(`["@D"]`, `[]`).Replace(config)},
		{index, manifest, r(`["@D"]`, `["@D","@D"]`).Replace(config)},
		{index, manifest, r(`"@D"`, `"md5:x"`).Replace(config)},
		// The layer twice; a foreign layer; an unknown media type.
		{index, r(`}]}`, `},{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"@L","size":@l}]}`).Replace(manifest), r(`["@D"]`, `["@D","@D"]`).Replace(config)},
		{index, r(`"size":@l}`, `"size":@l,"urls":["http://127.0.0.1/"]}`).Replace(manifest), config},
		{index, r("layer.v1.tar", "layer.v1.tar+encrypted").Replace(manifest), config},
		// Docker media types, schema 1, another platform.
		{r("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json").Replace(index),
			r("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json").Replace(manifest), config},
		{index, r(`"schemaVersion":2`, `"schemaVersion":1`).Replace(manifest), config},
		{index, manifest, r(`"os":"linux"`, `"os":"windows"`).Replace(config)},
		// Not JSON, JSON of the wrong shape, duplicate keys.
		{`null`, `[]`, `"x"`},
		{`{"schemaVersion":2,"manifests":{"a":1}}`, `{"layers":[null]}`, `{"rootfs":null}`},
		{`{"schemaVersion":2,"manifests":[{"digest":"@M","digest":"sha256:00","size":@m,"mediaType":"application/vnd.oci.image.manifest.v1+json"}]}`, manifest, config},
		{index, manifest, `{"rootfs":{"diff_ids":["@D"]},"config":{"WorkingDir":"../../..","User":"0:0","Env":["LD_PRELOAD=/x"]}}`},
	}
}

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
