package main

import (
	"fmt"
	"io"
	"os"
)

// workDir makes a fresh folder under parent ("": the system's temp folder)
// for one run's daemons and data, and returns it with what the run does
// when it ends: remove the folder, or, with keep, say where it was kept.
func workDir(parent, prefix string, keep bool, stderr io.Writer) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return dir, func() { fmt.Fprintf(stderr, "kept the work dir (data dirs and logs) in %s\n", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
