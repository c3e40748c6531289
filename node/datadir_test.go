package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The data dir is made 0700, and one made beforehand open to others is
// closed at start, with a line in the log.
func TestDataDirClosed(t *testing.T) {
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	made := filepath.Join(t.TempDir(), "made", "data")
	if err := prepareDataDir(made, logger); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Fatalf("a new data dir logged: %s", log.String())
	}
	if err := prepareDataDir(open, logger); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{made, open} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v; want 0700", d, st.Mode(), err)
		}
	}
	if !strings.Contains(log.String(), "made it 0700") || !strings.Contains(log.String(), "was=0755") {
		t.Fatalf("log: %s", log.String())
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareDataDir(file, logger); err == nil {
		t.Fatal("a file taken for a data dir")
	}
}
