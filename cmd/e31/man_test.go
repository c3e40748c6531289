package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestManPages writes the man pages and checks there is one for every
// command a user can run, named as man expects, and none for hidden ones.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if _, stderr, err := e31(t, "man", "--dir", dir); err != nil {
		t.Fatalf("e31 man: %v %s", err, stderr)
	}
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand(&globalOptions{})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	if len(want) < 15 {
		t.Fatalf("only %d commands found: %v", len(want), want)
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no page %s: %v", name, err)
			continue
		}
		title := strings.ToUpper(strings.TrimSuffix(name, ".1"))
		if !strings.Contains(string(b), `.TH "`+title+`" "1"`) || !strings.Contains(string(b), ".SH NAME") {
			t.Errorf("%s is not a section 1 page titled %s:\n%.300s", name, title, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "e31.1")); !strings.Contains(string(b), `"~/.e31/e31.sock"`) {
		t.Errorf("e31.1 gives the generating user's home as the default API:\n%s", b)
	}
	for _, hidden := range []string{"e31-man.1"} {
		if _, err := os.Stat(filepath.Join(dir, hidden)); err == nil {
			t.Errorf("a page for the hidden command: %s", hidden)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Errorf("%d pages for %d commands", len(entries), len(want))
	}
}

func TestManNeedsADir(t *testing.T) {
	if _, _, err := e31(t, "man"); err == nil || !strings.Contains(err.Error(), "dir") {
		t.Errorf("e31 man without --dir: %v", err)
	}
}

// TestCompletion checks that each shell gets its script, one a shell would
// load (each names the command in its own syntax).
func TestCompletion(t *testing.T) {
	for shell, mark := range map[string]string{
		"bash": "__start_e31",
		"zsh":  "#compdef e31",
		"fish": "complete -c e31",
	} {
		out, stderr, err := e31(t, "completion", shell)
		if err != nil || !strings.Contains(out, mark) {
			t.Errorf("completion %s: %v %s; output lacks %q (%d bytes)", shell, err, stderr, mark, len(out))
		}
	}
}
