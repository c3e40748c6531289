package ui

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The page shows what peers wrote (a job's name, a GPU's model, a reason):
// it must set such text as text, so no script of the page may hand a string
// to the browser's HTML parser or to eval. A name like
// `<img src=x onerror=…>` then stays a name.
func TestPageNeverParsesTextAsHTML(t *testing.T) {
	parses := regexp.MustCompile(`\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|\bsrcdoc\b|\beval\(|new Function\(|setTimeout\(\s*["'\x60]|setInterval\(\s*["'\x60]`)
	scripts := 0
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".js") {
			return err
		}
		scripts++
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := parses.FindString(line); m != "" {
				t.Errorf("%s:%d uses %s, which parses a string as HTML or code: set text with textContent or el()", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts == 0 {
		t.Fatal("no script found under static/")
	}
}
