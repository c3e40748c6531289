package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/e31network/e31/content"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// writeBenchLayout writes an OCI layout holding one image of n
// uncompressed layers, each a tar of one file of size random bytes, and
// returns the paths of its blobs.
func writeBenchLayout(b *testing.B, dir string, n int, size int64) []string {
	b.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		b.Fatal(err)
	}
	writeBlob := func(write func(w io.Writer) error) (v1.Descriptor, string) {
		tmp := filepath.Join(dir, "tmp")
		f, err := os.Create(tmp)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		cw := &countWriter{w: io.MultiWriter(f, h)}
		if err := write(cw); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
		p := filepath.Join(blobs, d.Hex)
		if err := os.Rename(tmp, p); err != nil {
			b.Fatal(err)
		}
		return v1.Descriptor{Digest: d, Size: cw.n}, p
	}
	var paths []string
	var layers []v1.Descriptor
	var diffIDs []v1.Hash
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		d, p := writeBlob(func(w io.Writer) error {
			tw := tar.NewWriter(w)
			if err := tw.WriteHeader(&tar.Header{Name: "data/" + string(rune('a'+i)), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			buf := make([]byte, 1<<20)
			for left := size; left > 0; left -= int64(len(buf)) {
				for j := 0; j < len(buf); j += 8 {
					v := rng.Uint64()
					for k := range 8 {
						buf[j+k] = byte(v >> (8 * k))
					}
				}
				if _, err := tw.Write(buf[:min(left, int64(len(buf)))]); err != nil {
					return err
				}
			}
			return tw.Close()
		})
		d.MediaType = types.OCIUncompressedLayer
		layers = append(layers, d)
		diffIDs = append(diffIDs, d.Digest)
		paths = append(paths, p)
	}
	json := func(v any) func(io.Writer) error {
		return func(w io.Writer) error {
			raw, err := jsonMarshal(v)
			if err == nil {
				_, err = w.Write(raw)
			}
			return err
		}
	}
	cd, cp := writeBlob(json(v1.ConfigFile{OS: "linux", Architecture: here.Architecture, RootFS: v1.RootFS{Type: "layers", DiffIDs: diffIDs}}))
	cd.MediaType = types.OCIConfigJSON
	md, mp := writeBlob(json(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cd, Layers: layers}))
	md.MediaType = types.OCIManifestSchema1
	idx, err := jsonMarshal(v1.IndexManifest{SchemaVersion: 2, Manifests: []v1.Descriptor{md}})
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), ociLayout, 0o644); err != nil {
		b.Fatal(err)
	}
	return append(paths, cp, mp)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkImportLayout imports a ~1 GiB, 8-layer image from an OCI layout
// into a fresh store (64 MiB with -short), and reports MiB/s beside the
// in-run baseline: sha256 of the same blob files, which every import must
// at least do. x-sha256 is import speed over hashing speed.
func BenchmarkImportLayout(b *testing.B) {
	layerSize := int64(128 << 20)
	if testing.Short() {
		layerSize = 8 << 20
	}
	dir := b.TempDir()
	layoutDir := filepath.Join(dir, "layout")
	paths := writeBenchLayout(b, layoutDir, 8, layerSize)
	var total int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		total += fi.Size()
	}

	start := time.Now()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	hashRate := float64(total) / (1 << 20) / time.Since(start).Seconds()

	ctx := context.Background()
	b.SetBytes(total)
	b.ResetTimer()
	var spent time.Duration
	for range b.N {
		b.StopTimer()
		storeDir := filepath.Join(dir, "store")
		s, err := content.Open(ctx, storeDir, content.StoreOptions{Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := Import(ctx, s, Ref{Transport: OCI, Path: layoutDir}, Options{}); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(t0)
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(storeDir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	rate := float64(total) * float64(b.N) / (1 << 20) / spent.Seconds()
	b.ReportMetric(rate, "MiB/s")
	b.ReportMetric(hashRate, "sha256-MiB/s")
	b.ReportMetric(rate/hashRate, "x-sha256")
}
