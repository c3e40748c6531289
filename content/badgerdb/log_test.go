package badgerdb

import (
	"log/slog"
	"strings"
	"testing"
)

// formatCount counts how often it is formatted.
type formatCount struct{ n *int }

func (f formatCount) String() string { *f.n++; return "x" }

// TestFormatsOnlyWhatIsLogged: Badger calls Debugf on every write; with
// debug off, nothing is formatted, and warnings and errors still are,
// without Badger's trailing newline.
func TestFormatsOnlyWhatIsLogged(t *testing.T) {
	var out strings.Builder
	n := 0
	l := NewLogger(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Debugf("writeRequests called %v\n", formatCount{&n})
	l.Infof("compaction %v\n", formatCount{&n})
	if n != 0 || out.Len() != 0 {
		t.Fatalf("debug off: formatted %d times, logged %q", n, out.String())
	}
	l.Warningf("slow disk %v\n", formatCount{&n})
	l.Errorf("bad disk %v", formatCount{&n})
	for _, want := range []string{`level=WARN msg="slow disk x" component=badger`, `level=ERROR msg="bad disk x" component=badger`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("logged %q, want a line with %q", out.String(), want)
		}
	}
	if n != 2 {
		t.Errorf("formatted %d times, want 2", n)
	}
	NewLogger(nil).Errorf("discarded %v", formatCount{&n})
}
