package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Binaries are the paths of the built commands.
type Binaries struct {
	E31d string
	E31  string
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
	// The GPU library's headers warn about deprecated calls on every build;
	// they say nothing about this code.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("build e31d and e31: %w\n%s", err, out)
	}
	return b, nil
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
