package submitter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
)

// readValuesFile takes one value a line, CRLF or LF, with or without a
// last newline, and refuses a relative path, an empty file and one larger
// than a signed declaration may be.
func TestReadValuesFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := &market.Array{ValuesFile: write("v.txt", "a\r\nb c\r\n\r\nd")}
	if err := readValuesFile(a); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b c", "", "d"}; !slices.Equal(a.Values, want) || a.ValuesFile != "" {
		t.Fatalf("values %q (file %q), want %q", a.Values, a.ValuesFile, want)
	}
	for _, tc := range []struct{ file, want string }{
		{"v.txt", "is not an absolute path"},
		{write("empty.txt", ""), "has no values"},
		{write("big.txt", strings.Repeat("x\n", wire.MaxDeclarationEnvelope)), "over"},
		{filepath.Join(dir, "missing.txt"), "no such file"},
	} {
		err := readValuesFile(&market.Array{ValuesFile: tc.file})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values_file %s: %v, want %q", filepath.Base(tc.file), err, tc.want)
		}
	}
}
