package content

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestNoGoroutineLeak fetches over both paths, closes everything, and checks
// that the goroutines this package started are gone.
func TestNoGoroutineLeak(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 2)
	// Warm up process-wide goroutines that libp2p and Badger start once.
	warm := startNode(t, &access{}, 0, t.TempDir())
	warm.close()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()

	var acc access
	sender := startNode(t, &acc, 0, t.TempDir())
	receiver := startNode(t, &access{}, 0, t.TempDir())
	connect(t, receiver, sender)
	root, _, err := sender.s.Import(ctx, src, ImportOptions{Pin: "in"})
	if err != nil {
		t.Fatal(err)
	}
	acc.allow(receiver.h.ID(), root)
	if _, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.x.FetchBitswap(ctx, sender.h.ID(), root, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	receiver.close()
	sender.close()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after closing:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
