package layers

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUnpack feeds mutated tars (good and hostile seeds, plain and
// compressed) to Unpack and checks that nothing ever appears outside the
// layer's directory, whatever the outcome.
func FuzzUnpack(f *testing.F) {
	requireRoot(f)
	good := goodLayer(f)
	f.Add(good)
	f.Add(gzipped(f, good))
	f.Add(zstded(f, good))
	f.Add(buildTar(f, dir("d/"), file("d/.wh..wh..opq", ""), file("d/.wh.x", ""), hardlink("d/y", "d/.wh.x")))
	f.Add(buildTar(f, tent{name: "dev/sda", typ: tar.TypeBlock}, tent{name: "p", typ: tar.TypeFifo}))
	for _, tc := range hostileCases() {
		b := tc.tar(f, "/tmp/e31-layers-fuzz-outside")
		if len(b) <= 64<<10 { // large inputs slow every mutation down
			f.Add(b)
		}
		f.Add(gzipped(f, b))
	}
	foreign, _ := filepath.Glob("testdata/*.tar*")
	for _, p := range foreign {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, blob []byte) {
		top := t.TempDir()
		layer, outside := filepath.Join(top, "layer"), filepath.Join(top, "outside")
		mkdirs(t, layer, outside)
		writeFile(t, filepath.Join(outside, "sentinel"), "untouched")
		_, err := Unpack(context.Background(), bytes.NewReader(blob), layer,
			UnpackOptions{UIDBase: 100000, GIDBase: 100000, MaxBytes: 1 << 20, MaxEntries: 512})
		assertOnlyLayerWritten(t, top)
		if err == nil {
			if _, err := summarize(context.Background(), layer); err != nil {
				t.Errorf("an accepted layer cannot be walked: %v", err)
			}
		}
	})
}
