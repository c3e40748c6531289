package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// benchLayer is one generated gzip layer blob.
type benchLayer struct {
	path   string
	digest v1.Hash // of the gzip blob, as the manifest names it
	diffID v1.Hash // of the tar inside
	size   int64   // of the blob
	tarred int64   // of the file contents inside
}

// hashingWriter counts and hashes what passes through it.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func newHashingWriter(w io.Writer) *hashingWriter {
	return &hashingWriter{w: w, h: sha256.New()}
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

func (hw *hashingWriter) digest() v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(hw.h.Sum(nil))}
}

// writeBenchLayer writes a gzip layer holding size bytes of files in dir,
// named by its digest. Files are 4 KiB to 4 MiB; their content alternates
// 4 KiB of random bytes and 4 KiB of text, so the layer compresses about
// as well as binaries do and gunzip costs what it costs on real images.
func writeBenchLayer(dir string, size int64, rng *rand.Rand) (benchLayer, error) {
	f, err := os.CreateTemp(dir, "layer-*.tmp")
	if err != nil {
		return benchLayer{}, err
	}
	defer f.Close()
	blob := newHashingWriter(f)
	zw, err := gzip.NewWriterLevel(blob, gzip.BestSpeed)
	if err != nil {
		return benchLayer{}, err
	}
	inner := newHashingWriter(zw)
	tw := tar.NewWriter(inner)
	chunk := make([]byte, 4<<20)
	var tarred int64
	for i := 0; tarred < size; i++ {
		if i%64 == 0 {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/", i/64), Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return benchLayer{}, err
			}
		}
		n := min(size-tarred, int64(4<<10)<<rng.IntN(11))
		buf := chunk[:n]
		for j := 0; j < len(buf); j += 8 {
			if (j/4096)%2 == 0 {
				v := rng.Uint64()
				for k := 0; k < 8 && j+k < len(buf); k++ {
					buf[j+k] = byte(v >> (8 * k))
				}
			} else {
				copy(buf[j:min(j+8, len(buf))], "layer.. ")
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/f%d", i/64, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: n}); err != nil {
			return benchLayer{}, err
		}
		if _, err := tw.Write(buf); err != nil {
			return benchLayer{}, err
		}
		tarred += n
	}
	if err := tw.Close(); err != nil {
		return benchLayer{}, err
	}
	if err := zw.Close(); err != nil {
		return benchLayer{}, err
	}
	if err := f.Close(); err != nil {
		return benchLayer{}, err
	}
	l := benchLayer{digest: blob.digest(), diffID: inner.digest(), size: blob.n, tarred: tarred}
	l.path = filepath.Join(dir, l.digest.Hex)
	return l, os.Rename(f.Name(), l.path)
}

// writeBenchLayers writes n layers that hold total bytes between them.
func writeBenchLayers(dir string, n int, total int64, rng *rand.Rand) ([]benchLayer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []benchLayer
	for i := range n {
		l, err := writeBenchLayer(dir, total/int64(n)+boolInt(i < int(total%int64(n))), rng)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// writeBenchLayout writes an OCI layout at dir holding one image of the
// given layers, bottom first. Layer blobs are hard links to the generated
// files, so two layouts that share a layer share its bytes on disk.
func writeBenchLayout(dir string, layers []benchLayer) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	cfg := v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH, RootFS: v1.RootFS{Type: "layers"}}
	for _, l := range layers {
		if err := os.Link(l.path, filepath.Join(blobs, l.digest.Hex)); err != nil {
			return err
		}
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Digest: l.digest, Size: l.size})
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
	}
	writeJSON := func(v any) (v1.Descriptor, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return v1.Descriptor{}, err
		}
		sum := sha256.Sum256(b)
		d := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Size: int64(len(b))}
		return d, os.WriteFile(filepath.Join(blobs, d.Digest.Hex), b, 0o644)
	}
	cd, err := writeJSON(cfg)
	if err != nil {
		return err
	}
	cd.MediaType = types.OCIConfigJSON
	m.Config = cd
	md, err := writeJSON(m)
	if err != nil {
		return err
	}
	md.MediaType = types.OCIManifestSchema1
	idx, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{md}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// layoutFiles lists the blob files of a layout and their total size.
func layoutFiles(dir string) ([]string, int64, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return nil, 0, err
	}
	var paths []string
	var total int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		paths = append(paths, filepath.Join(dir, "blobs", "sha256", e.Name()))
		total += fi.Size()
	}
	return paths, total, nil
}
