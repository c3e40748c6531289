package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestImportCompressedArchive: an archive compressed whole, as `docker save
// | gzip` writes it, imports as the same image as the plain tar; xz and a
// damaged stream are refused by name, with nothing pinned and no temporary
// file left.
func TestImportCompressedArchive(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	dir := t.TempDir()
	_, plainPath := writeOCIArchive(t, dir, platformImage(t, here, 2<<20, 2))
	plain, err := os.ReadFile(plainPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Import(ctx, s, Ref{Transport: OCIArchive, Path: plainPath}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Temporary files are unlinked at once: none may be seen in TMPDIR.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	archives := map[string]string{
		"gzip": write("oci.tar.gz", gz.Bytes()),
		"zstd": write("oci.tar.zst", enc.EncodeAll(plain, nil)),
	}
	if bz, err := exec.LookPath("bzip2"); err == nil {
		out, err := exec.Command(bz, "-c", plainPath).Output()
		if err != nil {
			t.Fatal(err)
		}
		archives["bzip2"] = write("oci.tar.bz2", out)
	}
	for kind, p := range archives {
		got, err := Import(ctx, s, Ref{Transport: OCIArchive, Path: p}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got.CID != want.CID || got.Digest != want.Digest {
			t.Errorf("%s: %s (%s), the plain archive %s (%s)", kind, got.CID, got.Digest, want.CID, want.Digest)
		}
	}

	before, err := List(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	damaged := write("damaged.tar.gz", gz.Bytes()[:gz.Len()/2])
	if _, err := Import(ctx, s, Ref{Transport: OCIArchive, Path: damaged}, Options{}); err == nil || !strings.Contains(err.Error(), "decompress archive") || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("a truncated gzip archive: %v, want an error naming the decompression", err)
	}
	xz := write("oci.tar.xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, make([]byte, 64)...))
	if _, err := Import(ctx, s, Ref{Transport: DockerArchive, Path: xz}, Options{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "xz -d") {
		t.Errorf("an xz archive: %v, want ErrInvalid saying to decompress it", err)
	}
	after, err := List(ctx, s)
	if err != nil || len(after) != len(before) {
		t.Errorf("images after the refused imports: %d, before %d (%v)", len(after), len(before), err)
	}
	left, err := os.ReadDir(tmp)
	if err != nil || len(left) != 0 {
		t.Errorf("left in TMPDIR: %v (%v)", left, err)
	}
}

// TestDecompressedLeavesPlainFilesAlone: a plain tar, and a file too short
// to hold any magic number, are read as they are.
func TestDecompressedLeavesPlainFilesAlone(t *testing.T) {
	for _, b := range [][]byte{nil, {0x1f}, []byte("plain tar bytes")} {
		p := filepath.Join(t.TempDir(), "a.tar")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decompressed(f, p)
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if got != f {
			t.Errorf("%q: replaced by %s", b, got.Name())
		}
		rest, _ := io.ReadAll(got)
		if !bytes.Equal(rest, b) {
			t.Errorf("%q: read %q", b, rest)
		}
		got.Close()
	}
}
