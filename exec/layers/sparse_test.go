package layers

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Zeros in a layer cost no disk: a file of them, tiny once gzipped, is
// unpacked as a hole of its size, and a file that mixes data and zeros
// reads back byte for byte.
func TestUnpackLeavesHolesForZeros(t *testing.T) {
	requireRoot(t)
	const zeroSize = 64 << 20
	mixed := "head" + strings.Repeat("\x00", 3<<20) + "middle" + strings.Repeat("\x00", 2<<20) + "tail"
	trailing := "data" + strings.Repeat("\x00", 2<<20)
	blob := gzipped(t, buildTar(t,
		file("zeros", strings.Repeat("\x00", zeroSize)),
		file("mixed", mixed),
		file("trailing", trailing),
	))
	if len(blob) > 1<<20 {
		t.Fatalf("the test's layer is %d bytes gzipped; meant to be tiny", len(blob))
	}
	dir := t.TempDir()
	if _, err := Unpack(context.Background(), bytes.NewReader(blob), dir, UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "zeros"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != zeroSize || st.Blocks*512 > 1<<20 {
		t.Fatalf("zeros: size %d, %d bytes on disk; want %d, a hole", st.Size, st.Blocks*512, zeroSize)
	}
	for name, want := range map[string]string{"mixed": mixed, "trailing": trailing} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte(want)) {
			t.Fatalf("%s: %d bytes read back, differ from the %d written", name, len(got), len(want))
		}
	}
}
