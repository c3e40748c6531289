package node

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The ceilings on the daemon's code: past them a type, a file or a knot of
// files has become more than a newcomer can hold in mind, as Submitter did
// with 81 methods. A part over its ceiling is listed in the exceptions
// below with the size it had when listed: it may shrink, not grow, and
// once within the ceiling it leaves the list, so that the list only ever
// gets shorter.
const (
	// maxMethods bounds the methods of any type under node/.
	maxMethods = 30
	// maxFileLines bounds a non-test file under node/.
	maxFileLines = 500
	// maxTies bounds the files of a role's package that a file is tied
	// to both ways: its code calls theirs and theirs calls it back.
	maxTies = 2
	// maxRecordCore bounds the fields of submitter.Record that are not
	// one of its embedded parts.
	maxRecordCore = 20
)

// overCeilings are the parts still over a ceiling, with their size when
// listed: "type pkg.Name", "file path", "ties path".
var overCeilings = map[string]int{}

func TestCeilings(t *testing.T) {
	root := moduleRoot(t)
	sizes := map[string]int{}
	limit := map[string]int{}
	methods := map[string]int{}
	err := filepath.WalkDir(filepath.Join(root, "node"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		key := "file " + filepath.ToSlash(rel)
		sizes[key], limit[key] = fset.File(f.Pos()).LineCount(), maxFileLines
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv != nil {
				if name := receiverName(fd.Recv.List[0].Type); name != "" {
					methods["type "+pkg+"."+name]++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range methods {
		sizes[k], limit[k] = n, maxMethods
	}
	for _, pkg := range []string{"node/submitter", "node/provider"} {
		for file, n := range filesTiedBothWays(t, filepath.Join(root, pkg)) {
			k := "ties " + pkg + "/" + file
			sizes[k], limit[k] = n, maxTies
		}
	}
	core := recordCoreFields(t, filepath.Join(root, "node", "submitter"))
	sizes["record node/submitter.Record"], limit["record node/submitter.Record"] = core, maxRecordCore

	keys := make([]string, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, max := sizes[k], limit[k]
		listed, isListed := overCeilings[k]
		switch {
		case isListed && n <= max:
			t.Errorf("%s is within its ceiling now (%d ≤ %d): take it off overCeilings", k, n, max)
		case isListed && n > listed:
			t.Errorf("%s grew to %d, past the %d it had when listed over its ceiling of %d", k, n, listed, max)
		case !isListed && n > max:
			t.Errorf("%s is %d, over its ceiling of %d: split it", k, n, max)
		}
	}
	for k := range overCeilings {
		if _, ok := sizes[k]; !ok {
			t.Errorf("%s is listed over its ceiling but no longer exists: take it off overCeilings", k)
		}
	}
}

func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// filesTiedBothWays type-checks the package in dir and counts, for each
// non-test file, the other files whose functions it calls and that call
// one of its functions back.
func filesTiedBothWays(t *testing.T, dir string) map[string]int {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export in %s: %v", dir, err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(filepath.Base(dir), fset, files, info)
	if err != nil {
		t.Fatalf("type-check %s: %v", dir, err)
	}
	calls := map[[2]string]bool{}
	for id, obj := range info.Uses {
		if _, ok := obj.(*types.Func); !ok || obj.Pkg() != pkg {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			calls[[2]string{from, to}] = true
		}
	}
	ties := map[string]int{}
	for c := range calls {
		if calls[[2]string{c[1], c[0]}] {
			ties[c[0]]++
		}
	}
	return ties
}

// recordCoreFields counts the named fields of submitter.Record: its
// embedded parts are not its core.
func recordCoreFields(t *testing.T, dir string) int {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range gd.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Record" {
						continue
					}
					n := 0
					for _, fl := range ts.Type.(*ast.StructType).Fields.List {
						n += len(fl.Names)
					}
					return n
				}
			}
		}
	}
	t.Fatal("no type Record in node/submitter")
	return 0
}
