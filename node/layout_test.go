package node

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The layering that docs/layout.md states, held as a test: the map names
// every package of the module, and no package imports across the lines
// the map draws. Every Go file counts, its tests and every build's files
// alike (build tags are not applied): a test that reached over a line
// would tie the packages together as surely as the code.
func TestLayout(t *testing.T) {
	root := moduleRoot(t)
	pkgs := modulePackages(t, root)
	t.Run("map", func(t *testing.T) { checkMap(t, root, pkgs) })
	t.Run("layers", func(t *testing.T) {
		for _, p := range pkgs {
			for _, imp := range p.imports {
				for _, r := range layering() {
					if r.from(p.dir) && r.to(imp.path) {
						t.Errorf("%s imports %s: %s", imp.file, imp.path, r.why)
					}
				}
			}
		}
	})
}

// A rule forbids the packages from matches to import the packages to
// matches; why says what the line keeps apart.
type layerRule struct {
	from, to func(dir string) bool
	why      string
}

// under matches the packages at and below each of dirs.
func under(dirs ...string) func(string) bool {
	return func(dir string) bool {
		for _, d := range dirs {
			if dir == d || strings.HasPrefix(dir, d+"/") {
				return true
			}
		}
		return false
	}
}

// layering is the rules docs/layout.md states under "Layers".
func layering() []layerRule {
	return []layerRule{
		{
			from: under("market", "ledger", "content", "exec", "p2p", "node/jobstate"),
			to:   under("node"),
			why:  "the parts below the daemon import nothing of node/",
		},
		{
			from: under("node/wire", "node/view"),
			to:   under("node/provider", "node/submitter", "node/api", "node/apiserver"),
			why:  "the peer protocol and the view import no role and not the local HTTP API",
		},
		{
			from: under("node/provider"),
			to:   under("node/submitter"),
			why:  "the roles do not import each other",
		},
		{
			from: under("node/submitter"),
			to:   under("node/provider"),
			why:  "the roles do not import each other",
		},
	}
}

// goPackage is one directory of Go files under the module's root.
type goPackage struct {
	dir     string // relative to the root, with slashes ("node/wire")
	imports []goImport
}

// goImport is one import of a package's file, the path relative to the
// module's root when it is the module's own.
type goImport struct {
	file, path string
}

// modulePackages walks the module as the go command would (skipping
// testdata and names starting with a dot or an underscore) and reads each
// Go file's imports.
func modulePackages(t *testing.T, root string) []goPackage {
	t.Helper()
	module := modulePath(t, root)
	byDir := map[string]*goPackage{}
	err := walkGoFiles(root, func(path string) error {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := byDir[dir]
		if p == nil {
			p = &goPackage{dir: dir}
			byDir[dir] = p
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if own, ok := strings.CutPrefix(imp, module+"/"); ok {
				p.imports = append(p.imports, goImport{file: rel, path: own})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]goPackage, 0, len(byDir))
	for _, p := range byDir {
		pkgs = append(pkgs, *p)
	}
	slices.SortFunc(pkgs, func(a, b goPackage) int { return strings.Compare(a.dir, b.dir) })
	dirs := make([]string, len(pkgs))
	for i, p := range pkgs {
		dirs[i] = p.dir
	}
	for _, want := range []string{"market", "node", "node/wire", "node/provider", "node/submitter"} {
		if !slices.Contains(dirs, want) {
			t.Fatalf("walked %d packages from %s, no %s among them: not the module's", len(dirs), root, want)
		}
	}
	return pkgs
}

// modulePath reads the module's path from go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// A path in the map: a name in backquotes that starts with one of the
// module's top directories ("node/wire", "market/").
var mapPath = regexp.MustCompile("`((?:cmd|content|exec|ledger|market|node|p2p|testnet)(?:/[a-z0-9_]+)*)/?`")

// checkMap holds docs/layout.md to the tree: every package is named in it,
// and every path it names is there.
func checkMap(t *testing.T, root string, pkgs []goPackage) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range mapPath.FindAllStringSubmatch(string(b), -1) {
		named[m[1]] = true
	}
	for _, p := range pkgs {
		if !named[p.dir] {
			t.Errorf("package %s is not in docs/layout.md: add it, with its job in a line", p.dir)
		}
	}
	for path := range named {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
			t.Errorf("docs/layout.md names %s, which is not in the tree", path)
		}
	}
}
