package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/e31network/e31/market"
)

// unstagedPaths finds the command's arguments that name a file or folder
// here, relative to base (the current folder, or the declaration's), when
// the job will not find it there: a job without an image starts in its
// output folder on the provider, which is empty, and sees of this machine
// only what its data mounts. Each finding is a line for the user saying
// where the job would see the path, or how to stage it. An image may hold
// such a path at its WorkingDir, so jobs with one are left alone; so is an
// argument that names nothing here.
func unstagedPaths(d market.Declaration, base string) []string {
	if d.Work.Image != "" {
		return nil
	}
	var notes []string
	for i, arg := range d.Work.Command {
		if arg == "" || strings.HasPrefix(arg, "-") || filepath.IsAbs(arg) || strings.ContainsAny(arg, " \t\n=") {
			continue
		}
		if i == 0 && !strings.Contains(arg, "/") {
			continue // a program found on the PATH
		}
		local := filepath.Join(base, arg)
		fi, err := os.Stat(local)
		if err != nil {
			continue
		}
		kind := "a file"
		if fi.IsDir() {
			kind = "a folder"
		}
		if at, ok := mountedAt(d.Data, local); ok {
			notes = append(notes, fmt.Sprintf("%q is %s here that the job sees at %s, not in the folder it starts in (%s): name %s in the command",
				arg, kind, at, d.Output.Path, at))
			continue
		}
		clean := filepath.ToSlash(filepath.Clean(arg))
		notes = append(notes, fmt.Sprintf("%q is %s here, but the job starts in its empty output folder (%s) on the provider and sees only what its data mounts: stage it with --input ./%s:/code/%s (in a declaration, data: [{source: ./%s, mount: /code/%s}]) and name /code/%s in the command",
			arg, kind, d.Output.Path, clean, clean, clean, clean, clean))
	}
	return notes
}

// mountedAt is where the job sees the local path p, when a data source
// holds it.
func mountedAt(data []market.Input, p string) (string, bool) {
	for _, in := range data {
		if !filepath.IsAbs(in.Source) {
			continue // a CID
		}
		rel, err := filepath.Rel(in.Source, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return path.Join(in.Mount, filepath.ToSlash(rel)), true
	}
	return "", false
}
