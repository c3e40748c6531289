package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// Media types of the layouts written here.
const (
	mediaManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaIndex     = "application/vnd.oci.image.index.v1+json"
	mediaConfig    = "application/vnd.oci.image.config.v1+json"
	mediaLayer     = "application/vnd.oci.image.layer.v1.tar"
	mediaLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// tarEntry is one entry of a layer written by hand: anything a tar can
// say, honest or not.
type tarEntry struct {
	hdr  tar.Header
	body []byte
}

func tfile(name, body string, mode int64) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}, []byte(body)}
}

func tdir(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

func tlink(typ byte, name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: target, Mode: 0o777}}
}

func tdev(typ byte, name string, major, minor int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: typ, Name: name, Mode: 0o666, Devmajor: major, Devminor: minor}}
}

// tarOf writes the entries as a tar, as they are.
func tarOf(t *testing.T, es ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar entry %q: %v", h.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ociLayer is a layer of a layout written by hand.
type ociLayer struct {
	mediaType string
	blob      []byte // the bytes the manifest's digest and size name
	// stored, when set, is written at the blob's path instead of blob
	// (a blob that does not match its digest); absent writes nothing
	// there (a manifest naming a blob that is not there).
	stored []byte
	absent bool
}

func (l ociLayer) digest() string { return "sha256:" + sha256Hex(l.blob) }

// diffID is the sha256 of the layer's tar: of blob itself when it does
// not decompress.
func (l ociLayer) diffID() string {
	if l.mediaType == mediaLayerGzip {
		if zr, err := gzip.NewReader(bytes.NewReader(l.blob)); err == nil {
			if b, err := io.ReadAll(zr); err == nil {
				return "sha256:" + sha256Hex(b)
			}
		}
	}
	return l.digest()
}

// ociImage is an image written by hand as an OCI layout: what a hostile
// submitter can make of one.
type ociImage struct {
	layers []ociLayer
	// config, when set, is the config blob as it is; otherwise one is
	// written for the layers, with Env PATH=/bin.
	config []byte
}

// blobPath is where a layout keeps the blob of a digest.
func blobPath(dir, digest string) string {
	return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// write lays the image out at dir, tagged v1, and returns its reference,
// oci:DIR:v1.
func (im ociImage) write(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) map[string]any {
		d := "sha256:" + sha256Hex(b)
		if err := os.WriteFile(blobPath(dir, d), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return map[string]any{"digest": d, "size": len(b)}
	}
	js := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var layers []map[string]any
	var diffIDs []string
	for _, l := range im.layers {
		layers = append(layers, map[string]any{"mediaType": l.mediaType, "digest": l.digest(), "size": len(l.blob)})
		diffIDs = append(diffIDs, l.diffID())
		switch {
		case l.absent:
		case l.stored != nil:
			if err := os.WriteFile(blobPath(dir, l.digest()), l.stored, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			put(l.blob)
		}
	}
	config := im.config
	if config == nil {
		config = js(map[string]any{
			"architecture": runtime.GOARCH, "os": "linux",
			"config": map[string]any{"Env": []string{"PATH=/bin"}},
			"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
		})
	}
	cd := put(config)
	cd["mediaType"] = mediaConfig
	md := put(js(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest, "config": cd, "layers": layers}))
	md["mediaType"] = mediaManifest
	md["annotations"] = map[string]string{"org.opencontainers.image.ref.name": "v1"}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), js(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []any{md},
	}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return "oci:" + dir + ":v1"
}

// busyboxLayer is a gzip layer holding the host's static busybox at
// /bin/busybox and the applets named, linked to it.
func busyboxLayer(t *testing.T, applets ...string) ociLayer {
	t.Helper()
	p, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox: apt-get install -y busybox-static")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	es := []tarEntry{tdir("bin/"), tfile("bin/busybox", string(b), 0o755)}
	for _, a := range applets {
		es = append(es, tlink(tar.TypeSymlink, "bin/"+a, "busybox"))
	}
	return ociLayer{mediaType: mediaLayerGzip, blob: gzipOf(t, tarOf(t, es...))}
}

// innocent is a small honest layer.
func innocent(t *testing.T) ociLayer {
	return ociLayer{mediaType: mediaLayerGzip, blob: gzipOf(t, tarOf(t, tdir("etc/"), tfile("etc/hello", "hello\n", 0o644)))}
}

// layerNamed is the regexp of a reason that names layer l by index and
// digest: "layer N (sha256:HEX…".
func layerNamed(l ociLayer) string {
	return `layer \d+ \(sha256:` + regexp.QuoteMeta(strings.TrimPrefix(l.digest(), "sha256:")[:12])
}

// imageCase is a job in a hostile image submitted the honest way (oci:DIR:v1
// through node 0's ordinary import, which checks digests but unpacks
// nothing): the provider must refuse the layer, naming it and why. The
// hostile layer comes second, over busybox, so that naming the layer at
// fault means something, and so that a layer wrongly taken shows as a job
// that runs and completes.
func imageCase(name string, layer func(t *testing.T) ociLayer, why ...string) hostileCase {
	return hostileCase{name: "image/" + name, image: true, want: failedJob(why...),
		build: func(t *testing.T, h *hostileNet, w *hostileWant) market.Declaration {
			bad := layer(t)
			w.reasonRE = layerNamed(bad)
			j := hostileJob(name, "echo ran > /out/result")
			j.Work.Image = ociImage{layers: []ociLayer{h.busybox(t), bad}}.write(t, filepath.Join(h.dir, "images", name))
			return j
		}}
}

// rawImageCase is an image that the honest import refuses: the test checks
// that an honest submitter refuses it at submit, naming why, then sends the
// same layout's DAG through node 0's POST /v1/debug/car and submits the
// job naming its CID, unchecked. The provider must refuse it.
func rawImageCase(name string, im func(t *testing.T, base ociLayer) (ociImage, *ociLayer), refused []string, why ...string) hostileCase {
	return hostileCase{name: "raw-image/" + name, image: true, want: failedJob(why...),
		build: func(t *testing.T, h *hostileNet, w *hostileWant) market.Declaration {
			img, bad := im(t, h.busybox(t))
			if bad != nil {
				w.reasonRE = layerNamed(*bad)
				refused = append(slices.Clip(refused), strings.TrimPrefix(bad.digest(), "sha256:")[:12])
			}
			dir := filepath.Join(h.dir, "images", "raw-"+name)
			j := hostileJob("raw-"+name, "echo ran > /out/result")
			j.Work.Image = img.write(t, dir)
			w.note = "honest submit refused: " + h.refusedAtSubmit(t, j, append([]string{"work.image"}, refused...))
			d := newDagSet()
			j.Work.Image = h.putRaw(t, d, d.tree(t, dir))
			return j
		}}
}

// refusedAtSubmit checks that an honest node (node 1) refuses the
// declaration at submit, with an error naming each of want, and returns
// the error.
func (h *hostileNet) refusedAtSubmit(t *testing.T, d market.Declaration, want []string) string {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.honest.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err == nil {
		_, _ = h.honest.Withdraw(context.Background(), j.ID)
		t.Fatalf("an honest submitter took the image the honest import should refuse (job %s)", j.ID)
	}
	if msg := matchAll(err.Error(), want, ""); msg != "" {
		t.Fatalf("an honest submitter refused the image, but unclearly (%s): %v", msg, err)
	}
	return err.Error()
}

// imageCases are the hostile images: every layer attack the unpacker
// knows, then the images only a hostile submitter can bring.
func imageCases() []hostileCase {
	layer := func(es ...tarEntry) func(t *testing.T) ociLayer {
		return func(t *testing.T) ociLayer {
			return ociLayer{mediaType: mediaLayerGzip, blob: gzipOf(t, tarOf(t, es...))}
		}
	}
	plain := func(b func(t *testing.T) []byte) func(t *testing.T) ociLayer {
		return func(t *testing.T) ociLayer { return ociLayer{mediaType: mediaLayer, blob: b(t)} }
	}
	asGzip := func(b func(t *testing.T) []byte) func(t *testing.T) ociLayer {
		return func(t *testing.T) ociLayer { return ociLayer{mediaType: mediaLayerGzip, blob: b(t)} }
	}
	files := func(n int) []tarEntry {
		es := make([]tarEntry, n)
		for i := range es {
			es[i] = tfile(fmt.Sprintf("f/%d", i), "", 0o644)
		}
		return es
	}
	cases := []hostileCase{
		imageCase("dotdot", layer(tfile("../evil", "evil\n", 0o644)), "../evil", "unsafe path"),
		imageCase("absolute", layer(tfile("/etc/evil", "evil\n", 0o644)), "/etc/evil", "unsafe path|absolute"),
		imageCase("symlink-then-write", layer(tlink(tar.TypeSymlink, "a", "/etc"), tfile("a/passwd", "root::0:0::/:/bin/sh\n", 0o644)),
			"a/passwd", "symlink"),
		imageCase("hardlink-outside", layer(tlink(tar.TypeLink, "shadow", "../../etc/shadow")), "shadow", "bad hard link|hard link"),
		imageCase("whiteout-dotdot", layer(tfile(".wh..", "", 0o644)), ".wh..", "whiteout"),
		imageCase("whiteout-root", layer(tfile(".wh.", "", 0o644)), ".wh.", "whiteout"),
		imageCase("gzip-type-plain-tar", asGzip(func(t *testing.T) []byte { return tarOf(t, tfile("x", "x", 0o644)) }), "gzip"),
		imageCase("gzip-type-random", asGzip(func(t *testing.T) []byte { return randomBytes(t, 4096) }), "gzip|not a well-formed layer|media type"),
		imageCase("not-tar", plain(func(t *testing.T) []byte { return randomBytes(t, 4096) }), "not a well-formed layer|tar"),
		imageCase("truncated", plain(func(t *testing.T) []byte {
			b := tarOf(t, tfile("big", string(bytes.Repeat([]byte("x"), 16<<10)), 0o644))
			return b[:len(b)/2]
		}), "not a well-formed layer|truncated|EOF"),
		imageCase("1500-entries", layer(append([]tarEntry{tdir("f/")}, files(1500)...)...), "entries|1000"),
		imageCase("16MiB-zeros", layer(tfile("zeros", string(make([]byte, 16<<20)), 0o644)), "zeros", "size cap|max-layer|8MiB|8388608|bytes"),
	}
	cases = append(cases,
		rawImageCase("digest-mismatch", func(t *testing.T, base ociLayer) (ociImage, *ociLayer) {
			// Plain tars of the same size: the stored one is a good layer,
			// only not the one the digest names.
			l := ociLayer{mediaType: mediaLayer, blob: tarOf(t, tfile("x", "the named bytes", 0o644))}
			l.stored = tarOf(t, tfile("x", "other bytes!!!!", 0o644))
			return ociImage{layers: []ociLayer{base, l}}, &l
		}, []string{"digest"}, "digest|match"),
		rawImageCase("missing-blob", func(t *testing.T, base ociLayer) (ociImage, *ociLayer) {
			l := ociLayer{mediaType: mediaLayerGzip, blob: gzipOf(t, tarOf(t, tfile("x", "never stored", 0o644))), absent: true}
			return ociImage{layers: []ociLayer{base, l}}, &l
		}, []string{"no such file|not found|missing"}, "missing|not found|no such|absent"),
		rawImageCase("config-not-json", func(t *testing.T, base ociLayer) (ociImage, *ociLayer) {
			return ociImage{layers: []ociLayer{base}, config: []byte("this is {not json")}, nil
		}, []string{"config"}, "config", "JSON|json|invalid"),
		rawImageCase("2000-layers", func(t *testing.T, base ociLayer) (ociImage, *ociLayer) {
			return ociImage{layers: append([]ociLayer{base}, slices.Repeat([]ociLayer{innocent(t)}, 1999)...)}, nil
		}, []string{"layers"}, "2000", "layers"),
	)
	return cases
}

// busyboxApplets are the applets the accepted images' jobs use.
var busyboxApplets = []string{"sh", "test", "grep", "echo", "cat", "ls"}

// acceptedImageCases are images with entries that are not refused but
// made harmless: device nodes are skipped, setuid and setgid files stay
// inert (the job runs with no_new_privs). The job checks both from inside.
func acceptedImageCases() []hostileCase {
	img := func(name, script string, es ...tarEntry) hostileCase {
		return hostileCase{
			name: "image/" + name, image: true,
			want: hostileWant{outcome: string(ledger.OutcomeCompleted), attribution: string(ledger.AttributionJob)},
			build: func(t *testing.T, h *hostileNet, _ *hostileWant) market.Declaration {
				extra := ociLayer{mediaType: mediaLayerGzip, blob: gzipOf(t, tarOf(t, es...))}
				j := hostileJob(name, script)
				j.Work.Image = ociImage{layers: []ociLayer{h.busybox(t), extra}}.write(t, filepath.Join(h.dir, "images", name))
				return j
			},
		}
	}
	return []hostileCase{
		img("device-nodes", `set -e
test -d /opt
test ! -c /opt/null && test ! -e /opt/null
test ! -b /opt/sda && test ! -e /opt/sda
test ! -e /opt/fifo
echo no-devices > /out/result`,
			tdir("opt/"), tdev(tar.TypeChar, "opt/null", 1, 3), tdev(tar.TypeBlock, "opt/sda", 8, 0), tdev(tar.TypeFifo, "opt/fifo", 0, 0)),
		img("setuid-setgid", `set -e
test -f /opt/suid && test -f /opt/sgid
grep -q 'NoNewPrivs:[[:space:]]*1' /proc/self/status
echo inert > /out/result`,
			tdir("opt/"), tfile("opt/suid", "#!/bin/sh\nid -u\n", 0o4755), tfile("opt/sgid", "#!/bin/sh\nid -g\n", 0o2755)),
	}
}
