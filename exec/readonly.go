package exec

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// readOnlyTail is how much of a failed job's stderr is searched for a
// write to a read-only path: its last lines, where a program's dying words
// are.
const readOnlyTail = 16 << 10

// quotedPath is an absolute path in quotes, as Python ('/ckpt/x'),
// coreutils ('/ckpt' or ‘/ckpt’) and Go ("/ckpt") name one.
var quotedPath = regexp.MustCompile("['\"`‘](/[^'\"`’\n]*)['\"`’]")

// barePath is an absolute path outside quotes ("cannot create /ckpt/x:").
var barePath = regexp.MustCompile(`(?:^|\s)(/[^\s:'"]+)`)

// readOnlyWrite looks in the tail of a job's stderr for the sign that it
// died writing where its sandbox is read-only: EROFS, which libc, Python,
// Go and the shell all word "Read-only file system". It returns the path
// the last such line names, if it names one.
func readOnlyWrite(stderrPath string) (seen bool, path string) {
	f, err := os.Open(stderrPath)
	if err != nil {
		return false, ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > readOnlyTail {
		if _, err := f.Seek(-readOnlyTail, io.SeekEnd); err != nil {
			return false, ""
		}
	}
	tail, err := io.ReadAll(io.LimitReader(f, readOnlyTail))
	if err != nil {
		return false, ""
	}
	sc := bufio.NewScanner(bytes.NewReader(tail))
	sc.Buffer(make([]byte, 0, 4096), readOnlyTail)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(strings.ToLower(line), "read-only file system") {
			continue
		}
		seen = true
		if m := quotedPath.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if m := barePath.FindStringSubmatch(line); m != nil {
			path = m[1]
		}
	}
	return seen, path
}

// writablePaths names where a job may write, for a hint to one that wrote
// elsewhere: its output and checkpoint paths and its scratch folders, or
// its whole root where it has an image and a disk.
func writablePaths(s Spec) string {
	if s.Image != nil && s.Disk != nil {
		return "anywhere in its root but its data inputs"
	}
	paths := []string{s.Output.Target}
	if s.Checkpoint != nil {
		paths = append(paths, s.Checkpoint.Target)
	}
	paths = append(paths, "/tmp", "/dev/shm")
	return "under " + strings.Join(paths[:len(paths)-1], ", ") + " and " + paths[len(paths)-1]
}

// readOnlyHint is what a failed job's reason adds when it died writing to
// a read-only path.
func readOnlyHint(path, writable string) string {
	what := "to a path"
	if path != "" {
		what = "to " + path
	}
	return fmt.Sprintf("it wrote %s where its sandbox is read-only (a job may write only %s): "+
		"declare the folder it keeps state in as its checkpoint path (output.checkpoints.path, --checkpoint-path), or write under its output path", what, writable)
}
