package layers

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostileCase is a layer that must be refused. outside is the absolute
// path of a directory beside the layer's, holding a file "sentinel".
type hostileCase struct {
	name  string
	tar   func(tb testing.TB, outside string) []byte
	opts  UnpackOptions
	want  error
	entry string // the entry the error must name
}

func hostileCases() []hostileCase {
	one := func(e ...tent) func(testing.TB, string) []byte {
		return func(tb testing.TB, _ string) []byte { return buildTar(tb, e...) }
	}
	big := tent{name: "big", typ: tar.TypeReg, size: 2 << 20, mode: 0o644}
	many := make([]tent, 20)
	for i := range many {
		many[i] = file("f"+strings.Repeat("x", i), "")
	}
	badOwner := file("f", "x")
	badOwner.uid = 65536
	return []hostileCase{
		{name: "dotdot", tar: one(file("../x", "evil")), want: ErrUnsafePath, entry: "../x"},
		{name: "dotdot inside", tar: one(dir("a/"), file("a/../../outside/x", "evil")), want: ErrUnsafePath, entry: "a/../../outside/x"},
		{name: "absolute", tar: func(tb testing.TB, outside string) []byte {
			return buildTar(tb, file(filepath.Join(outside, "x"), "evil"))
		}, want: ErrUnsafePath, entry: "/"},
		{name: "symlink to /etc then a/passwd", tar: one(symlink("a", "/etc"), file("a/passwd", "root::0:0::/:/bin/sh\n")),
			want: ErrUnsafePath, entry: "a/passwd"},
		{name: "symlink to outside then write", tar: func(tb testing.TB, outside string) []byte {
			return buildTar(tb, symlink("a", outside), file("a/sentinel", "evil"))
		}, want: ErrUnsafePath, entry: "a/sentinel"},
		{name: "symlink ../.. then a/x", tar: one(symlink("a", "../.."), file("a/x", "evil")), want: ErrUnsafePath, entry: "a/x"},
		{name: "symlink ../outside then dir", tar: one(symlink("a", "../outside"), dir("a/d/")), want: ErrUnsafePath, entry: "a/d/"},
		{name: "symlink inside then through it", tar: one(dir("d/"), symlink("s", "d"), file("s/x", "y")), want: ErrUnsafePath, entry: "s/x"},
		{name: "opaque through symlink", tar: one(symlink("a", "../outside"), file("a/.wh..wh..opq", "")), want: ErrUnsafePath, entry: "a/.wh..wh..opq"},
		{name: "whiteout through symlink", tar: one(symlink("a", "../outside"), file("a/.wh.sentinel", "")), want: ErrUnsafePath, entry: "a/.wh.sentinel"},
		{name: "whiteout of dotdot", tar: one(file(".wh..", "")), want: ErrUnsafePath, entry: ".wh.."},
		{name: "symlink replacing the root", tar: one(symlink("./", "/")), want: ErrUnsafePath, entry: "./"},
		{name: "file as a parent", tar: one(file("f", "x"), file("f/g", "y")), want: ErrUnsafePath, entry: "f/g"},
		{name: "hardlink to /etc/shadow", tar: one(hardlink("x", "/etc/shadow")), want: ErrBadLink, entry: "x"},
		{name: "hardlink to ../outside", tar: one(hardlink("x", "../outside/sentinel")), want: ErrBadLink, entry: "x"},
		{name: "hardlink to missing", tar: one(hardlink("x", "nothere")), want: ErrBadLink, entry: "x"},
		{name: "hardlink through symlink", tar: func(tb testing.TB, outside string) []byte {
			return buildTar(tb, symlink("s", outside), hardlink("x", "s/sentinel"))
		}, want: ErrBadLink, entry: "x"},
		{name: "hardlink to a directory", tar: one(dir("d/"), hardlink("x", "d")), want: ErrBadLink, entry: "x"},
		{name: "oversized file", tar: one(big), opts: UnpackOptions{MaxBytes: 1 << 20}, want: ErrTooLarge, entry: "big"},
		{name: "oversized sum", tar: one(file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 600))),
			opts: UnpackOptions{MaxBytes: 1000}, want: ErrTooLarge, entry: "b"},
		{name: "too many entries", tar: one(many...), opts: UnpackOptions{MaxEntries: 10}, want: ErrTooLarge, entry: many[10].name},
		{name: "owner outside the namespace", tar: one(badOwner), opts: UnpackOptions{UIDBase: 100000, GIDBase: 100000},
			want: ErrBadOwner, entry: "f"},
	}
}

func TestUnpackRefusesHostileLayers(t *testing.T) {
	requireRoot(t)
	passwdBefore := lstatOf("/etc/passwd")
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			layer, outside := filepath.Join(top, "layer"), filepath.Join(top, "outside")
			mkdirs(t, layer, outside)
			writeFile(t, filepath.Join(outside, "sentinel"), "untouched")
			blob := tc.tar(t, outside)
			for _, b := range [][]byte{blob, gzipped(t, blob)} {
				clearDir(t, layer)
				_, err := Unpack(context.Background(), bytes.NewReader(b), layer, tc.opts)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				var ee *EntryError
				if !errors.As(err, &ee) || !strings.Contains(ee.Entry, tc.entry) || !strings.Contains(err.Error(), ee.Entry) {
					t.Errorf("error %q does not name entry %q", err, tc.entry)
				}
				assertOnlyLayerWritten(t, top)
			}
		})
	}
	if after := lstatOf("/etc/passwd"); passwdBefore != nil && (after == nil || after.Mtim != passwdBefore.Mtim || after.Size != passwdBefore.Size) {
		t.Errorf("/etc/passwd changed")
	}
}

// assertOnlyLayerWritten checks that top holds only "layer" and
// "outside/sentinel", unchanged.
func assertOnlyLayerWritten(tb testing.TB, top string) {
	tb.Helper()
	var got []string
	err := filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, p)
		got = append(got, rel)
		if rel == "layer" && d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	want := []string{".", "layer", "outside", "outside/sentinel"}
	if !slices.Equal(got, want) {
		tb.Errorf("outside the layer: %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(top, "outside", "sentinel")); err != nil || string(b) != "untouched" {
		tb.Errorf("sentinel: %q, %v", b, err)
	}
	if st := lstatOf(filepath.Join(top, "outside", "sentinel")); st == nil || st.Mode&0o170000 != 0o100000 {
		tb.Errorf("sentinel is no longer a regular file")
	}
}

func mkdirs(tb testing.TB, dirs ...string) {
	tb.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
}

func writeFile(tb testing.TB, p, body string) {
	tb.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func clearDir(tb testing.TB, d string) {
	tb.Helper()
	if err := os.RemoveAll(d); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		tb.Fatal(err)
	}
}
