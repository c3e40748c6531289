package content

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// directFile creates a file opened for direct writes in a temporary
// directory, or skips where the file system has no direct I/O.
func directFile(t *testing.T, flag int) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "direct")
	f, err := os.OpenFile(path, flag|os.O_CREATE|unix.O_DIRECT, 0o600)
	if errors.Is(err, unix.EINVAL) {
		t.Skip("no direct I/O on this file system")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

// alignedBuffer maps n bytes, page-aligned as direct I/O requires and
// outside the Go heap, as packs.stage is.
func alignedBuffer(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

func newTestAsyncWriter(t *testing.T) *asyncWriter {
	t.Helper()
	w, err := newAsyncWriter()
	if err != nil {
		t.Skipf("no AIO here: %v", err)
	}
	t.Cleanup(func() { w.close() })
	return w
}

func TestAsyncWriterWrites(t *testing.T) {
	w := newTestAsyncWriter(t)
	f, path := directFile(t, os.O_WRONLY)
	buf := alignedBuffer(t, 3<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	// Two writes, the second past the first, as a pack is appended to.
	if err := w.writeAt(f, buf[:1<<20], 0); err != nil {
		t.Fatal(err)
	}
	if err := w.writeAt(f, buf[1<<20:], 1<<20); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(buf))
	}
}

// TestAsyncWriterRefusalCanBeRetried: a request the kernel refuses
// (here, a descriptor not open for writing) is reported as errNoAsync,
// so packs can make the same write synchronously, which fails too here.
func TestAsyncWriterRefusalCanBeRetried(t *testing.T) {
	w := newTestAsyncWriter(t)
	f, _ := directFile(t, os.O_RDONLY)
	err := w.writeAt(f, alignedBuffer(t, 4096), 0)
	if !errors.Is(err, errNoAsync) || !errors.Is(err, unix.EBADF) {
		t.Fatalf("write to a read-only file: %v, want errNoAsync and EBADF", err)
	}
	// The writer is still usable.
	g, _ := directFile(t, os.O_WRONLY)
	if err := w.writeAt(g, alignedBuffer(t, 4096), 0); err != nil {
		t.Fatalf("write after a refusal: %v", err)
	}
}

// TestAsyncWriterReportsIOErrors: a write that fails when it runs comes
// back as its error; one the kernel refuses as a request (an unaligned
// buffer, which direct I/O refuses with EINVAL, at submission or when it
// runs) as errNoAsync too, so that packs try it again with pwrite.
func TestAsyncWriterReportsIOErrors(t *testing.T) {
	w := newTestAsyncWriter(t)
	f, _ := directFile(t, os.O_WRONLY)
	buf := alignedBuffer(t, 8192)
	err := w.writeAt(f, buf[1:4097], 0)
	if !errors.Is(err, unix.EINVAL) || !errors.Is(err, errNoAsync) {
		t.Fatalf("unaligned direct write: %v, want errNoAsync and EINVAL", err)
	}
	// Past the largest file size the file system allows.
	err = w.writeAt(f, buf[:4096], 1<<62)
	if err == nil || errors.Is(err, errNoAsync) {
		t.Fatalf("write past the largest file: %v, want an error of the write", err)
	}
}

// TestPacksWriteAsynchronously checks that packs take the asynchronous
// path where the file system allows direct I/O, and that what they write
// reads back.
func TestPacksWriteAsynchronously(t *testing.T) {
	newTestAsyncWriter(t) // skips where the kernel does no AIO
	dir := t.TempDir()
	p, err := openPacks(filepath.Join(dir, packDir))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	data := bytes.Repeat([]byte("pack"), 64<<10)
	locs, err := p.append([][]byte{data, data[:packMinBlock]}, false)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	direct, async := p.direct, p.aio != nil
	p.mu.Unlock()
	if !direct {
		t.Skip("no direct I/O on this file system")
	}
	if !async {
		t.Fatal("a direct pack was written without AIO")
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{data, data[:packMinBlock]} {
		got := make([]byte, len(want))
		if err := p.read(locs[i], got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d read back differs", i)
		}
	}
}
