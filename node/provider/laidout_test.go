package provider

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/ipfs/go-cid"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/wire/wiretest"
)

// exports is a store whose Export writes a marker file and counts, and
// whose pins are set by the test.
type exports struct {
	unpins
	mu    sync.Mutex
	calls int
	pins  []content.Pin
}

func (e *exports) Export(_ context.Context, root cid.Cid, dest string, _ content.ExportOptions) error {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dest, "data"), []byte(root.String()), 0o644)
}

func (e *exports) Pins(context.Context) ([]content.Pin, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pins, nil
}

// An input is laid out once for every lease that reads it, is kept while a
// lease mounts it or a pin holds its root, and is swept after; a layout a
// crash left unfinished is swept at start.
func TestInputLaidOutOnceAndSwept(t *testing.T) {
	ctx := context.Background()
	store := &exports{}
	p := newTestProvider(t, wiretest.FreshParty(t), Config{DataDir: t.TempDir()}, &absent{}, store, &statetest.Records{}, &ledgertest.Memory{})
	root, err := cid.Decode(wiretest.CID(t, "dataset"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.inputs.layOut(ctx, root, "lease-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.inputs.layOut(ctx, root, "lease-b")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || store.calls != 1 {
		t.Fatalf("two leases got %s and %s from %d exports, want one layout", a, b, store.calls)
	}
	if got, err := os.ReadFile(filepath.Join(a, "data")); err != nil || string(got) != root.String() {
		t.Fatalf("layout holds %q (%v)", got, err)
	}

	unfinished := filepath.Join(p.inputs.inputsDir(), layoutTmpPrefix+"bafy-gone")
	if err := os.MkdirAll(unfinished, 0o755); err != nil {
		t.Fatal(err)
	}
	p.inputs.doneWithLaidOut("lease-a")
	if err := p.inputs.sweepLaidOut(map[string]bool{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("a layout still mounted by lease-b was swept: %v", err)
	}
	if _, err := os.Stat(unfinished); err != nil {
		t.Fatalf("an unfinished layout was swept outside the start: %v", err)
	}
	p.inputs.doneWithLaidOut("lease-b")
	if err := p.inputs.sweepLaidOut(map[string]bool{root.String(): true}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("a layout whose root is pinned was swept: %v", err)
	}
	if err := p.inputs.sweepLaidOut(map[string]bool{}, true); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{a, unfinished} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s left after the sweep: %v", gone, err)
		}
	}
}

// slowExports is a store whose Export waits for release, so that leases
// arrive while a root is being laid out.
type slowExports struct {
	exports
	started chan struct{}
	release chan struct{}
}

func (e *slowExports) Export(ctx context.Context, root cid.Cid, dest string, o content.ExportOptions) error {
	e.started <- struct{}{}
	<-e.release
	return e.exports.Export(ctx, root, dest, o)
}

// Leases that arrive while their input is being laid out wait for that
// export instead of copying the same bytes beside it.
func TestConcurrentLeasesLayOutOnce(t *testing.T) {
	ctx := context.Background()
	store := &slowExports{started: make(chan struct{}, 4), release: make(chan struct{})}
	p := newTestProvider(t, wiretest.FreshParty(t), Config{DataDir: t.TempDir()}, &absent{}, store, &statetest.Records{}, &ledgertest.Memory{})
	root, err := cid.Decode(wiretest.CID(t, "dataset"))
	if err != nil {
		t.Fatal(err)
	}
	leases := []string{"lease-a", "lease-b", "lease-c", "lease-d"}
	type got struct {
		dst string
		err error
	}
	out := make(chan got, len(leases))
	layOut := func(lease string) {
		dst, err := p.inputs.layOut(ctx, root, lease)
		out <- got{dst, err}
	}
	go layOut(leases[0])
	<-store.started
	for _, l := range leases[1:] {
		go layOut(l)
	}
	// Every lease has recorded its mount before it waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.inputs.mu.Lock()
		n := len(p.inputs.laidOut[root.String()])
		p.inputs.mu.Unlock()
		if n == len(leases) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d leases reached the layout", n, len(leases))
		}
		time.Sleep(time.Millisecond)
	}
	close(store.release)
	var dst string
	for range leases {
		g := <-out
		if g.err != nil {
			t.Fatal(g.err)
		}
		if dst != "" && g.dst != dst {
			t.Fatalf("leases got layouts %s and %s", dst, g.dst)
		}
		dst = g.dst
	}
	if store.calls != 1 {
		t.Fatalf("%d exports for %d concurrent leases, want 1", store.calls, len(leases))
	}
}
