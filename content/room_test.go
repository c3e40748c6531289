package content

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A store whose Room refuses writes past a budget refuses an import that
// would take more, with ErrNoRoom and no pin, and takes one that fits.
func TestImportRefusedWithoutRoom(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var asked int64
	budget := int64(6 << 20)
	s, err := Open(ctx, t.TempDir(), StoreOptions{Log: testLog(), Room: func(n int64) error {
		mu.Lock()
		defer mu.Unlock()
		if asked+n > budget {
			return errors.New("over budget")
		}
		asked += n
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	dir := t.TempDir()
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Import(ctx, filepath.Join(dir, "big"), ImportOptions{Pin: "big"}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("import past the room: %v, want ErrNoRoom", err)
	}
	pins, err := s.Pins(ctx)
	if err != nil || len(pins) != 0 {
		t.Fatalf("pins after a refused import: %v %v", pins, err)
	}
	mu.Lock()
	asked = 0
	mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "small"), big[:1<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Import(ctx, filepath.Join(dir, "small"), ImportOptions{Pin: "small"}); err != nil {
		t.Fatalf("import within the room: %v", err)
	}
}
