package images

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/layers"
	"github.com/ipfs/go-cid"
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
