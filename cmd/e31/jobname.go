package main

import (
	"path/filepath"
	"strings"
)

// launchers are programs that run a script or module named later on their
// command line: a job run through one is named after that script.
var launchers = map[string]bool{
	"python": true, "python2": true, "python3": true, "pypy": true, "pypy3": true, "uv": true,
	"torchrun": true, "accelerate": true, "deepspeed": true, "mpirun": true, "srun": true,
	"bash": true, "sh": true, "zsh": true, "node": true, "deno": true, "bun": true, "ruby": true,
	"perl": true, "Rscript": true, "julia": true, "lua": true, "java": true, "env": true,
}

// scriptSuffixes are the endings of a script file on a launcher's line.
var scriptSuffixes = []string{".py", ".sh", ".js", ".mjs", ".ts", ".rb", ".pl", ".R", ".r", ".jl", ".lua", ".jar", ".ipynb"}

// commandName is a job's default name from its command: the script a
// launcher runs (python3 train.py → train.py; python -m pkg.train →
// pkg.train; torchrun --nproc_per_node 8 train.py → train.py), else the
// program's base name (sh -c '…' → sh).
func commandName(command []string) string {
	if len(command) == 0 {
		return ""
	}
	prog := filepath.Base(command[0])
	if !isLauncher(prog) {
		return prog
	}
	for i := 1; i < len(command); i++ {
		a := command[i]
		if a == "-m" && i+1 < len(command) {
			return command[i+1]
		}
		if a == "-c" {
			break // inline code: nothing names it
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		for _, suf := range scriptSuffixes {
			if strings.HasSuffix(a, suf) && len(a) > len(suf) {
				return filepath.Base(a)
			}
		}
	}
	return prog
}

// isLauncher reports whether prog is a launcher, a versioned one included
// (python3.11).
func isLauncher(prog string) bool {
	if launchers[prog] {
		return true
	}
	base, minor, ok := strings.Cut(prog, ".")
	return ok && strings.HasPrefix(base, "python") && launchers[base] && minor != "" &&
		strings.Trim(minor, "0123456789") == ""
}
