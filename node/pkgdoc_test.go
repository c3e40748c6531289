package node

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every package of the module has a doc comment that a newcomer can read
// first, opening as go doc expects ("Package name …", or "Command …" for a
// main package). Modelled on tailscale's pkgdoc_test.go; it lives here for
// want of a package at the module's root.
func TestPackageDocs(t *testing.T) {
	root := moduleRoot(t)
	type pkg struct {
		name        string
		docs, files []string // files with a package doc; every file parsed
		testOnly    bool
	}
	pkgs := map[string]*pkg{}
	err := walkGoFiles(root, func(path string) error {
		// Build tags are not applied: a package doc in a file that only
		// one build compiles would be missing from the others.
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			return nil // an external test package documents nothing
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		test := strings.HasSuffix(path, "_test.go")
		p := pkgs[dir]
		switch {
		case p == nil:
			p = &pkg{name: f.Name.Name, testOnly: test}
			pkgs[dir] = p
		case p.testOnly && !test:
			// A package's doc lives in its non-test files when it has any.
			*p = pkg{name: f.Name.Name}
		case test && !p.testOnly:
			return nil
		}
		p.files = append(p.files, path)
		if f.Doc != nil {
			p.docs = append(p.docs, path)
			text := f.Doc.Text()
			want := "Package " + p.name + " "
			if p.name == "main" {
				want = "Command "
			}
			if !strings.HasPrefix(text, want) {
				t.Errorf("%s: package doc opens %q, want %q…", path, strings.SplitN(text, "\n", 2)[0], want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		p := pkgs[dir]
		switch {
		case len(p.docs) == 0:
			t.Errorf("no package doc in %s (package %s): add a doc.go", dir, p.name)
		case len(p.docs) > 1:
			t.Logf("several files with a package doc in %s: %q", dir, p.docs)
		}
	}
	if !slices.Contains(dirs, "node") || !slices.Contains(dirs, "market") {
		t.Fatalf("walked %d packages from %s, not the module's", len(dirs), root)
	}
	t.Logf("%d packages", len(dirs))
}

// moduleRoot is the directory above this one that holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// walkGoFiles calls fn with the path of every Go file of the module below
// root, as the go command sees the tree: testdata and names starting with
// a dot or an underscore are skipped.
func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}
