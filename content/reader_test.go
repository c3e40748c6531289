package content

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func bytesFile(p string, b []byte) TreeFile {
	return TreeFile{Path: p, Size: int64(len(b)), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

// TestImportTreeMatchesImport: a tree built from streams has the same root
// as the same tree imported from disk, so content is addressed the same way
// whichever path it came in by.
func TestImportTreeMatchesImport(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	files := map[string][]byte{
		"a":         []byte("small"),
		"empty":     nil,
		"d/big":     randomBytes(3<<20+17, 1),
		"d/e/exact": randomBytes(1<<20, 2),
	}
	dir := t.TempDir()
	var tree []TreeFile
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, 0o644); err != nil {
			t.Fatal(err)
		}
		tree = append(tree, bytesFile(p, b))
	}
	for _, d := range []string{dir, filepath.Join(dir, "d"), filepath.Join(dir, "d", "e")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := s.Import(ctx, dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := s.ImportTree(ctx, tree, ImportOptions{Pin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("ImportTree root %s, Import root %s", got, want)
	}
	if n != 4<<20+22 {
		t.Errorf("imported %d bytes", n)
	}

	for p, b := range files {
		c, err := s.Resolve(ctx, got, p)
		if err != nil {
			t.Fatalf("resolve %s: %v", p, err)
		}
		r, err := s.Open(ctx, c)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		data, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || !bytes.Equal(data, b) {
			t.Fatalf("read %s: %d bytes, err %v; want %d bytes", p, len(data), err, len(b))
		}
	}

	// Seek works across chunk boundaries.
	c, _ := s.Resolve(ctx, got, "d/big")
	r, err := s.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Seek(2<<20+5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(r, buf); err != nil || !bytes.Equal(buf, files["d/big"][2<<20+5:2<<20+15]) {
		t.Fatalf("read after seek: %x, %v", buf, err)
	}

	if _, err := s.Resolve(ctx, got, "d/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("resolve missing: %v, want ErrNotFound", err)
	}
	if _, err := s.Resolve(ctx, got, "a/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("resolve through a file: %v, want ErrNotFound", err)
	}
	if _, err := s.Open(ctx, got); !errors.Is(err, ErrUnsupported) {
		t.Errorf("open a directory: %v, want ErrUnsupported", err)
	}
}

// TestImportTreeRefuses: a reader that fails or lies about its size leaves
// no pin, and bad paths fail before anything is read.
func TestImportTreeRefuses(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	boom := errors.New("boom")
	failing := TreeFile{Path: "x", Size: 3 << 20, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(randomBytes(2<<20, 3)), errReader{boom})), nil
	}}
	if _, _, err := s.ImportTree(ctx, []TreeFile{failing}, ImportOptions{Pin: "p"}); !errors.Is(err, boom) {
		t.Fatalf("failing reader: %v", err)
	}
	short := bytesFile("y", []byte("abc"))
	short.Size = 4
	if _, _, err := s.ImportTree(ctx, []TreeFile{short}, ImportOptions{Pin: "p"}); err == nil {
		t.Fatal("short reader accepted")
	}
	long := bytesFile("y", []byte("abcde"))
	long.Size = 4
	if _, _, err := s.ImportTree(ctx, []TreeFile{long}, ImportOptions{Pin: "p"}); err == nil {
		t.Fatal("long reader accepted")
	}
	for _, p := range []string{"", "../x", "a//b", "a/./b", "/abs"} {
		if _, _, err := s.ImportTree(ctx, []TreeFile{bytesFile(p, nil)}, ImportOptions{Pin: "p"}); !errors.Is(err, ErrUnsafeName) {
			t.Errorf("path %q: %v, want ErrUnsafeName", p, err)
		}
	}
	dup := []TreeFile{bytesFile("a/b", nil), bytesFile("a", nil)}
	if _, _, err := s.ImportTree(ctx, dup, ImportOptions{Pin: "p"}); err == nil {
		t.Error("a path that is a file and a directory was accepted")
	}
	if _, _, err := s.ImportTree(ctx, []TreeFile{bytesFile("a", make([]byte, 10))}, ImportOptions{MaxBytes: 9}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the cap: %v", err)
	}
	pins, err := s.Pins(ctx)
	if err != nil || len(pins) != 0 {
		t.Fatalf("pins after failures: %v, %v", pins, err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestUsageCountsSharedBlocksOnce: two trees sharing a file take the
// shared blocks once.
func TestUsageCountsSharedBlocksOnce(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	shared := randomBytes(2<<20, 4)
	a, _, err := s.ImportTree(ctx, []TreeFile{bytesFile("s", shared), bytesFile("a", []byte("a"))}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u1, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.ImportTree(ctx, []TreeFile{bytesFile("s", shared), bytesFile("b", []byte("b"))}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u2, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := s.Size(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || u2.Bytes-u1.Bytes >= sb-int64(len(shared)) || u1.Bytes < int64(len(shared)) {
		t.Fatalf("usage %d then %d bytes; second tree is %d bytes with %d shared", u1.Bytes, u2.Bytes, sb, len(shared))
	}
}
