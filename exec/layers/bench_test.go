package layers

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// BenchmarkUnpackVsTar unpacks a set of generated gzip layers (1 GiB of
// content; 32 MiB with -short) with Unpack and, in the same run, with the
// system's `tar -xzf`, and reports both rates and their ratio. Run it once:
//
//	go test -run='^$' -bench=UnpackVsTar -benchtime=1x ./exec/layers
func BenchmarkUnpackVsTar(b *testing.B) {
	requireRoot(b)
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		b.Skip("no tar on this machine")
	}
	total := int64(1 << 30)
	if testing.Short() {
		total = 32 << 20
	}
	const layerCount = 8
	work := b.TempDir()
	blobs := make([]string, layerCount)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range blobs {
		blobs[i] = filepath.Join(work, fmt.Sprintf("layer%d.tar.gz", i))
		writeBenchLayer(b, blobs[i], total/layerCount, rng)
	}
	mib := float64(total) / (1 << 20)

	var ours, theirs time.Duration
	iter := 0
	for b.Loop() {
		iter++
		for i, blob := range blobs {
			dst := filepath.Join(work, fmt.Sprintf("ours%d-%d", iter, i))
			mkdirs(b, dst)
			f, err := os.Open(blob)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			_, err = Unpack(context.Background(), f, dst, UnpackOptions{UIDBase: 100000, GIDBase: 100000})
			ours += time.Since(start)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}

			dst = filepath.Join(work, fmt.Sprintf("tar%d-%d", iter, i))
			mkdirs(b, dst)
			start = time.Now()
			out, err := exec.Command(tarBin, "-xzf", blob, "-C", dst).CombinedOutput()
			theirs += time.Since(start)
			if err != nil {
				b.Fatalf("tar: %v\n%s", err, out)
			}
		}
		for _, pattern := range []string{"ours*", "tar*"} {
			dirs, _ := filepath.Glob(filepath.Join(work, pattern))
			for _, d := range dirs {
				if err := os.RemoveAll(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	n := float64(iter)
	b.ReportMetric(mib*n/ours.Seconds(), "unpack-MiB/s")
	b.ReportMetric(mib*n/theirs.Seconds(), "tar-MiB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "x-tar-speed")
}

// writeBenchLayer writes a gzip layer of files whose content is half random
// and half text, so that it compresses about as well as binaries do.
func writeBenchLayer(tb testing.TB, p string, size int64, rng *rand.Rand) {
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	chunk := make([]byte, 4<<20)
	for i := 0; size > 0; i++ {
		if i%64 == 0 {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/", i/64), Typeflag: tar.TypeDir, Mode: 0o755, ModTime: testTime}); err != nil {
				tb.Fatal(err)
			}
		}
		n := min(size, int64(4<<10)<<rng.IntN(11)) // 4 KiB .. 4 MiB
		size -= n
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
		hdr := &tar.Header{Name: fmt.Sprintf("d%d/f%d", i/64, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: n, ModTime: testTime}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(buf); err != nil {
			tb.Fatal(err)
		}
	}
	for _, c := range []io.Closer{tw, zw} {
		if err := c.Close(); err != nil {
			tb.Fatal(err)
		}
	}
}
