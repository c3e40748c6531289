package market

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeps keeps market a pure function of its inputs: no network, file
// system, clock or randomness, and none of the packages that bring them.
func TestDeps(t *testing.T) {
	forbidden := func(path string) bool {
		switch path {
		case "net", "os", "time", "math/rand", "math/rand/v2", "io/fs", "io/ioutil",
			"syscall", "context", "crypto/rand", "unsafe", "runtime", "plugin":
			return true
		}
		for _, prefix := range []string{"net/", "os/", "github.com/libp2p/", "github.com/e31network/e31/"} {
			if strings.HasPrefix(path, prefix) {
				return true
			}
		}
		return false
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if forbidden(path) {
				t.Errorf("%s imports %q: market must stay free of I/O, clocks and randomness", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}

// TestPackageDoc keeps the package comment where a newcomer looks first.
func TestPackageDoc(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package market ") {
		t.Fatal("doc.go must carry the package comment, starting \"Package market \"")
	}
}
