package content

import (
	"log/slog"
	"strings"
	"testing"
)

// formatCount counts how often it is formatted.
type formatCount struct{ n *int }

func (f formatCount) String() string { *f.n++; return "x" }

// TestBadgerLoggerFormatsOnlyWhatIsLogged: Badger calls Debugf on every
// write; with debug off, nothing is formatted, and warnings still are,
// without Badger's trailing newline.
func TestBadgerLoggerFormatsOnlyWhatIsLogged(t *testing.T) {
	var out strings.Builder
	n := 0
	l := badgerLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Debugf("writeRequests called %v\n", formatCount{&n})
	l.Infof("compaction %v\n", formatCount{&n})
	if n != 0 || out.Len() != 0 {
		t.Fatalf("debug off: formatted %d times, logged %q", n, out.String())
	}
	l.Warningf("slow disk %v\n", formatCount{&n})
	if n != 1 || !strings.Contains(out.String(), `msg="slow disk x"`) {
		t.Fatalf("warning: formatted %d times, logged %q", n, out.String())
	}
}
