package provider

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
)

// Past the retention window, a settled lease's pins go and its record is
// forgotten; a lease still inside the window, or not settled, keeps both.
func TestRetentionReleasesSettledLeases(t *testing.T) {
	ctx := context.Background()
	store, err := content.Open(ctx, t.TempDir(), content.StoreOptions{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records, err := state.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer records.Close()
	self := wiretest.FreshParty(t)
	p := newTestProvider(t, self, Config{Retention: time.Hour}, &absent{}, store, records, &ledgertest.Memory{})

	now := time.Now()
	old := releasedLease(t, p, self, now.Add(-2*time.Hour))
	recent := releasedLease(t, p, self, now.Add(-time.Minute))
	unsettled := releasedLease(t, p, self, now.Add(-2*time.Hour))
	old.rec.FinalSigned, recent.rec.FinalSigned = true, true
	roots := map[string]cid.Cid{}
	for name, l := range map[string]*leaseRunner{"old": old, "recent": recent, "unsettled": unsettled} {
		l.rec.Lease.Terms.ID = "l" + name // distinct leases; their signatures play no part here
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := store.Import(ctx, dir, content.ImportOptions{Pin: pinOutput(l.rec.ID())})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Pin(ctx, c, pinCheckpoint(l.rec.ID(), 3)); err != nil {
			t.Fatal(err)
		}
		roots[name] = c
		l.rec.Output = c.String()
		if err := l.write(l.rec); err != nil {
			t.Fatal(err)
		}
	}
	n, err := p.retention.sweep(ctx, now, false)
	if err != nil || n != 1 {
		t.Fatalf("sweep released %d leases (%v), want 1", n, err)
	}
	pins, err := store.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[cid.Cid]bool{}
	for _, pin := range pins {
		pinned[pin.Root] = len(pin.Reasons) > 0
	}
	if pinned[roots["old"]] || !pinned[roots["recent"]] || !pinned[roots["unsettled"]] {
		t.Fatalf("pinned after the sweep: old %t, recent %t, unsettled %t", pinned[roots["old"]], pinned[roots["recent"]], pinned[roots["unsettled"]])
	}
	if has, _ := store.Has(ctx, roots["old"]); has {
		t.Fatal("the expired lease's blocks were not collected")
	}
	var left []string
	if err := records.Each(state.PrefixLease, func(b []byte) error { left = append(left, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, old.rec.ID()) }) {
		t.Fatalf("%d records left, the expired one among them: %t", len(left), slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, old.rec.ID()) }))
	}
}

// A disk with no room for new work releases early what settled leases keep
// for retention, however recent, once their submitters hold their outputs;
// an unsettled lease keeps its content, and so does one whose output its
// submitter has not fetched.
func TestRetentionYieldsToRoom(t *testing.T) {
	ctx := context.Background()
	store, err := content.Open(ctx, t.TempDir(), content.StoreOptions{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records, err := state.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer records.Close()
	self := wiretest.FreshParty(t)
	p := newTestProvider(t, self, Config{Retention: 7 * 24 * time.Hour}, &absent{}, store, records, &ledgertest.Memory{})
	now := time.Now()
	settled := releasedLease(t, p, self, now.Add(-time.Minute))
	unsettled := releasedLease(t, p, self, now.Add(-time.Minute))
	settled.rec.FinalSigned, settled.rec.OutputAcked = true, now
	unfetched := releasedLease(t, p, self, now.Add(-time.Minute))
	unfetched.rec.FinalSigned = true // its submitter was away: its output waits
	roots := map[string]cid.Cid{}
	for name, l := range map[string]*leaseRunner{"settled": settled, "unsettled": unsettled, "unfetched": unfetched} {
		l.rec.Lease.Terms.ID = "l" + name
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := store.Import(ctx, dir, content.ImportOptions{Pin: pinOutput(l.rec.ID())})
		if err != nil {
			t.Fatal(err)
		}
		roots[name] = c
		if err := l.write(l.rec); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := p.retention.sweep(ctx, now, false); err != nil || n != 0 {
		t.Fatalf("inside the retention window: released %d (%v)", n, err)
	}
	if n, err := p.retention.sweep(ctx, now, true); err != nil || n != 1 {
		t.Fatalf("for room on the disk: released %d (%v), want the settled lease", n, err)
	}
	if has, _ := store.Has(ctx, roots["settled"]); has {
		t.Fatal("the settled lease's output was kept")
	}
	for _, kept := range []string{"unsettled", "unfetched"} {
		if has, _ := store.Has(ctx, roots[kept]); !has {
			t.Fatalf("the %s lease's output went", kept)
		}
	}
}
