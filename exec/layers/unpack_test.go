package layers

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// goodLayer has one of everything a layer may hold.
func goodLayer(tb testing.TB) []byte {
	suid := file("usr/bin/su", "#!/bin/true\n")
	suid.mode = 0o4755
	owned := file("home/user/notes", "mine")
	owned.uid, owned.gid = 1000, 1001
	oldtime := dir("var/old/")
	oldtime.mtime = testTime.AddDate(-3, 0, 0)
	return buildTar(tb,
		dir("./"),
		dir("usr/"), dir("usr/bin/"),
		file("usr/bin/busybox", "ELF pretend"),
		suid,
		symlink("usr/bin/sh", "/usr/bin/busybox"),
		symlink("usr/bin/ls", "busybox"),
		hardlink("usr/bin/hardbox", "usr/bin/busybox"),
		owned, // parents implied
		oldtime,
		file("var/old/f", "x"),
		tent{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		tent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o600},
		file("etc/.wh.removed", ""),
		file("opt/.wh..wh..opq", ""),
		file("opt/new", "fresh"),
		file(".wh..wh.plnk/123", ""),
		file("usr/bin/busybox2", "first"),
		file("usr/bin/busybox2", "second wins"),
	)
}

func TestUnpackFormats(t *testing.T) {
	requireRoot(t)
	raw := goodLayer(t)
	for _, tc := range []struct {
		name      string
		blob      []byte
		mediaType string
		want      Compression
	}{
		{"plain", raw, "", Plain},
		{"gzip", gzipped(t, raw), "", Gzip},
		{"zstd", zstded(t, raw), "", Zstd},
		{"gzip by media type", gzipped(t, raw), "application/vnd.oci.image.layer.v1.tar+gzip", Gzip},
		{"docker gzip", gzipped(t, raw), "application/vnd.docker.image.rootfs.diff.tar.gzip", Gzip},
		{"zstd by media type", zstded(t, raw), "application/vnd.oci.image.layer.v1.tar+zstd", Zstd},
		{"plain by media type", raw, "application/vnd.oci.image.layer.v1.tar", Plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			const base = 100000
			st, err := Unpack(context.Background(), bytes.NewReader(tc.blob), dir,
				UnpackOptions{MediaType: tc.mediaType, UIDBase: base, GIDBase: base})
			if err != nil {
				t.Fatal(err)
			}
			if st.Compression != tc.want {
				t.Errorf("compression %v, want %v", st.Compression, tc.want)
			}
			checkGoodLayer(t, dir, base, st)
		})
	}
}

func checkGoodLayer(t *testing.T, dir string, base int, st UnpackStats) {
	t.Helper()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	readIs := func(rel, want string) {
		t.Helper()
		b, err := os.ReadFile(p(rel))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
		}
	}
	lstat := func(rel string) *syscall.Stat_t {
		t.Helper()
		var s syscall.Stat_t
		if err := syscall.Lstat(p(rel), &s); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		return &s
	}
	readIs("usr/bin/busybox", "ELF pretend")
	readIs("usr/bin/busybox2", "second wins")
	readIs("opt/new", "fresh")

	if s := lstat("usr/bin/su"); s.Mode&0o7777 != 0o4755 || s.Uid != uint32(base) || s.Gid != uint32(base) {
		t.Errorf("su: mode %o uid %d gid %d, want 4755 %d %d", s.Mode&0o7777, s.Uid, s.Gid, base, base)
	}
	if s := lstat("home/user/notes"); s.Uid != uint32(base+1000) || s.Gid != uint32(base+1001) {
		t.Errorf("notes owned by %d:%d, want %d:%d", s.Uid, s.Gid, base+1000, base+1001)
	}
	// Implied parents and the root belong to the container's root.
	for _, rel := range []string{".", "home", "home/user"} {
		if s := lstat(rel); s.Uid != uint32(base) || s.Mode&0o7777 != 0o755 {
			t.Errorf("%s: uid %d mode %o", rel, s.Uid, s.Mode&0o777)
		}
	}
	if got, err := os.Readlink(p("usr/bin/sh")); err != nil || got != "/usr/bin/busybox" {
		t.Errorf("sh -> %q, %v", got, err)
	}
	if s := lstat("usr/bin/sh"); s.Uid != uint32(base) || s.Mtim.Sec != testTime.Unix() {
		t.Errorf("symlink uid %d mtime %d", s.Uid, s.Mtim.Sec)
	}
	if a, b := lstat("usr/bin/busybox"), lstat("usr/bin/hardbox"); a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("hard link: inodes %d and %d, nlink %d", a.Ino, b.Ino, a.Nlink)
	}
	if s := lstat("var/old"); s.Mtim.Sec != testTime.AddDate(-3, 0, 0).Unix() {
		t.Errorf("dir mtime %d, want %d (set after its contents)", s.Mtim.Sec, testTime.AddDate(-3, 0, 0).Unix())
	}
	if s := lstat("usr/bin/busybox"); s.Mtim.Sec != testTime.Unix() {
		t.Errorf("file mtime %d, want %d", s.Mtim.Sec, testTime.Unix())
	}
	if s := lstat("etc/removed"); s.Mode&syscall.S_IFMT != syscall.S_IFCHR || s.Rdev != 0 {
		t.Errorf("whiteout: mode %o rdev %d, want a 0/0 char device", s.Mode, s.Rdev)
	}
	if opq, err := isOpaque(p("opt")); err != nil || !opq {
		t.Errorf("opt opaque: %v, %v", opq, err)
	}
	for _, rel := range []string{"dev/null", "run/fifo", "etc/.wh.removed", "opt/.wh..wh..opq", ".wh..wh.plnk"} {
		if _, err := os.Lstat(p(rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists (%v), want it skipped", rel, err)
		}
	}
	if st.Skipped != 3 || st.Whiteouts != 1 || st.OpaqueDirs != 1 || st.Hardlinks != 1 || st.Symlinks != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnpackNoShift(t *testing.T) {
	requireRoot(t)
	owned := file("f", "x")
	owned.uid, owned.gid = 70000, 5
	dir := t.TempDir()
	if _, err := Unpack(context.Background(), bytes.NewReader(buildTar(t, owned)), dir, UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
	var s syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, "f"), &s); err != nil || s.Uid != 70000 || s.Gid != 5 {
		t.Errorf("owner %d:%d, %v; want the tar's 70000:5", s.Uid, s.Gid, err)
	}
}

func TestUnpackRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Unpack(context.Background(), bytes.NewReader(buildTar(t, file("a", "b"))), dir, UnpackOptions{})
	if !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("err %v, want ErrNotEmpty", err)
	}
}

func TestUnpackMediaTypeMismatch(t *testing.T) {
	raw := buildTar(t, file("a", "b"))
	for _, tc := range []struct {
		blob []byte
		mt   string
	}{
		{raw, "application/vnd.oci.image.layer.v1.tar+gzip"},
		{gzipped(t, raw), "application/vnd.oci.image.layer.v1.tar+zstd"},
		{gzipped(t, raw), "application/vnd.oci.image.layer.v1.tar+gzip+encrypted"},
	} {
		_, err := Unpack(context.Background(), bytes.NewReader(tc.blob), t.TempDir(), UnpackOptions{MediaType: tc.mt})
		if !errors.Is(err, ErrMediaType) {
			t.Errorf("%s: err %v, want ErrMediaType", tc.mt, err)
		}
	}
}

func TestUnpackCorruptGzip(t *testing.T) {
	requireRoot(t)
	blob := gzipped(t, buildTar(t, file("a", strings.Repeat("b", 4096))))
	blob[len(blob)-6] ^= 0xff // inside the CRC
	_, err := Unpack(context.Background(), bytes.NewReader(blob), t.TempDir(), UnpackOptions{})
	if err == nil {
		t.Fatal("a gzip stream with a bad checksum was accepted")
	}
}

func TestUnpackCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Unpack(ctx, bytes.NewReader(buildTar(t, file("a", "b"))), t.TempDir(), UnpackOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// lstatOf is a helper for hostile tests: the raw stat of a path or nil.
func lstatOf(p string) *unix.Stat_t {
	var s unix.Stat_t
	if unix.Lstat(p, &s) != nil {
		return nil
	}
	return &s
}
