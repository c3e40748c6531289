package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the paths of the built commands.
type Binaries struct {
	E31d string
	E31  string
	// E31dByzantine is e31d built with the byzantine tag (BuildByzantine),
	// for nodes that misbehave on purpose; empty unless built.
	E31dByzantine string
}

// ModuleRoot finds the directory holding go.mod, walking up from the working
// directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Build compiles e31d and e31 into dir.
func Build(ctx context.Context, dir string) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, err
	}
	b := Binaries{E31d: filepath.Join(dir, "e31d"), E31: filepath.Join(dir, "e31")}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir, "./cmd/e31d", "./cmd/e31")
	cmd.Dir = root
	cmd.Env = buildEnv(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("build e31d and e31: %w\n%s", err, out)
	}
	return b, nil
}

// BuildByzantine compiles e31d with the byzantine tag into dir, as
// e31d-byzantine, and returns its path: the daemon that Options.Misbehave
// nodes run.
func BuildByzantine(ctx context.Context, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "e31d-byzantine")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "byzantine", "-o", out, "./cmd/e31d")
	cmd.Dir = root
	cmd.Env = buildEnv(os.Environ())
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build e31d with the byzantine tag: %w\n%s", err, b)
	}
	return out, nil
}

// BuildTemp compiles e31d and e31 into a new temporary folder, for a test
// binary's TestMain; remove deletes the folder.
func BuildTemp(ctx context.Context) (b Binaries, remove func(), err error) {
	dir, err := os.MkdirTemp("", "e31-bin-")
	if err != nil {
		return Binaries{}, nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if b, err = Build(ctx, dir); err != nil {
		remove()
		return Binaries{}, nil, err
	}
	return b, remove, nil
}

// StatSources looks at every Go source and go.mod/go.sum of the module
// from this process. go test caches a package's result by what its tests
// read under the module root; the daemons' sources are read by a go build
// (Build), which it does not see, so a package that tests real daemons
// calls this from a test (not from TestMain, whose reads are not recorded):
// otherwise its result could be served from the cache after the daemons
// changed.
func StatSources() {
	root, err := ModuleRoot()
	if err != nil {
		return
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if name := d.Name(); strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			_, _ = os.Stat(path)
		}
		return nil
	})
}

// quietNVML is the CGO_CFLAGS of a build when the user set none: Go's
// default (-O2 -g) plus silence for the NVML header, which marks calls
// deprecated that go-nvml wraps; its thirty warnings on a first build say
// nothing about this code.
const quietNVML = "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations"

// buildEnv is env with quietNVML added unless CGO_CFLAGS is already set
// (a user's own flags win, as they would for their own go build).
func buildEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "CGO_CFLAGS=") {
			return env
		}
	}
	return append(env, quietNVML)
}
