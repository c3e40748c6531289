package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"man", "--dir", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("e31d man: %v %s", err, out.String())
	}
	for _, page := range []string{"e31d.1", "e31d-doctor.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("no page %s: %v", page, err)
			continue
		}
		if !strings.Contains(string(b), ".SH OPTIONS") || !strings.Contains(string(b), `--data\fP="~/.e31"`) {
			t.Errorf("%s lacks its options:\n%.400s", page, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "e31d-man.1")); err == nil {
		t.Error("a page for the hidden man command")
	}
}
