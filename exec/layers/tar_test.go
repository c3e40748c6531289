package layers

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// tent is one entry of a test tar.
type tent struct {
	name     string
	typ      byte
	body     string
	size     int64 // when set, the header claims this size (body is ignored)
	link     string
	mode     int64
	uid, gid int
	mtime    time.Time
}

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

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

func buildTar(tb testing.TB, ents ...tent) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		mt := e.mtime
		if mt.IsZero() {
			mt = testTime
		}
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: mt, Format: tar.FormatPAX,
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if e.size > 0 {
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatalf("tar header %q: %v", e.name, err)
		}
		if e.size > 0 {
			if _, err := io.CopyN(tw, zeros{}, e.size); err != nil {
				tb.Fatal(err)
			}
		} else if e.typ == tar.TypeReg {
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

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
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

func zstded(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("unpacking layers needs root (chown, mknod, trusted xattrs)")
	}
}
