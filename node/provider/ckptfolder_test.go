package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ckptStore imports by calling during (the job writing as the folder is
// read) and answers a fresh CID for each import.
type ckptStore struct {
	unpins
	mu      sync.Mutex
	imports int
	during  func(n int)
}

func (s *ckptStore) Import(_ context.Context, dir string, _ content.ImportOptions) (cid.Cid, int64, error) {
	s.mu.Lock()
	s.imports++
	n := s.imports
	s.mu.Unlock()
	if s.during != nil {
		s.during(n)
	}
	c, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x12, MhLength: -1}.Sum([]byte(fmt.Sprint(dir, n)))
	return c, 1, err
}

func (s *ckptStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.imports
}

type allowAll struct{}

func (allowAll) Allow(peer.ID, cid.Cid) {}

// runningLease is a lease whose job runs, with a checkpoint folder holding
// one file last written at written.
func runningLease(t *testing.T, store *ckptStore, written time.Time) (*Provider, *leaseRunner, string) {
	t.Helper()
	self := wiretest.FreshParty(t)
	p := newTestProvider(t, self, Config{EventTimeout: time.Second}, &absent{calls: map[protocol.ID]int{}}, store, &statetest.Records{}, &ledgertest.Memory{})
	p.d.Access = allowAll{}
	sub := wiretest.FreshParty(t)
	l := p.newRunner(&Record{Lease: wiretest.SignedLease(t, self, sub), State: Running,
		Declaration: market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil)}, sub.ID)
	dir := t.TempDir()
	f := filepath.Join(dir, "model.pt")
	if err := os.WriteFile(f, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, dir} {
		if err := os.Chtimes(p, written, written); err != nil {
			t.Fatal(err)
		}
	}
	return p, l, dir
}

// writeNow appends to f and stamps it with the clock's now (in a bubble,
// the bubble's).
func writeNow(t *testing.T, f string) {
	appendTo(t, f)
	if err := os.Chtimes(f, time.Now(), time.Now()); err != nil {
		t.Error(err)
	}
}

// startLoop runs p's checkpoint loop over dir; stop ends it and waits for
// what it started.
func startLoop(p *Provider, l *leaseRunner, dir string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.checkpointLoop(ctx, dir, every) }()
	return func() {
		cancel()
		<-done
		p.tasks.Wait(context.Background())
	}
}

func appendTo(t *testing.T, f string) {
	w, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer w.Close()
	if _, err := w.Write([]byte("more")); err != nil {
		t.Error(err)
	}
}

// A capture of a checkpoint folder is kept only if the job was not
// writing it: not in the settle time before, and not while it was read.
func TestCheckpointCaptureWaitsForTheFolderToSettle(t *testing.T) {
	ctx := context.Background()
	// In a bubble, where the clock stands still until something waits:
	// "just now" stays just now however slowly the test runs.
	const justNow, long, future = 0, -time.Minute, time.Minute
	for _, tc := range []struct {
		name        string
		written     time.Duration
		mode        captureMode
		writeDuring bool
		wantErr     error
		wantImport  bool
		wantKept    bool
	}{
		{"settled", long, captureSettled, false, nil, true, true},
		{"written just now", justNow, captureSettled, false, errUnsettled, false, false},
		{"written while read", long, captureSettled, true, errUnsettled, true, false},
		{"steady: just written, not while read", justNow, captureSteady, false, nil, true, true},
		{"steady: written while read", long, captureSteady, true, errUnsettled, true, false},
		{"final: as it is", justNow, captureFinal, true, nil, true, true},
		{"a time to come, set by hand", future, captureSettled, false, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &ckptStore{}
				p, l, dir := runningLease(t, store, time.Now().Add(tc.written))
				if tc.writeDuring {
					store.during = func(int) { appendTo(t, filepath.Join(dir, "model.pt")) }
				}
				err := l.takeCheckpoint(ctx, dir, tc.mode)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Fatalf("takeCheckpoint: %v, want %v", err, tc.wantErr)
				}
				if got := store.count() > 0; got != tc.wantImport {
					t.Errorf("imported %v, want %v", got, tc.wantImport)
				}
				rec := l.snapshot()
				if kept := rec.Checkpoint != ""; kept != tc.wantKept {
					t.Errorf("checkpoint %q kept %v, want %v", rec.Checkpoint, kept, tc.wantKept)
				}
				if tc.wantImport && !tc.wantKept && len(store.reasons) != 1 {
					t.Errorf("a capture not kept must be unpinned: unpins %q", store.reasons)
				}
				p.tasks.Wait(ctx)
			})
		})
	}
}

// A capture that was not kept is tried again within the interval; a folder
// that never settles for a whole interval is taken at the next one, from
// a capture that saw no change while it read the folder.
func TestCheckpointLoopRetriesAndFallsBack(t *testing.T) {
	t.Run("retried within the interval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := &ckptStore{}
			p, l, dir := runningLease(t, store, time.Now().Add(-time.Minute))
			store.during = func(n int) {
				if n == 1 {
					writeNow(t, filepath.Join(dir, "model.pt"))
				}
			}
			stop := startLoop(p, l, dir, 10*time.Second)
			time.Sleep(10*time.Second + time.Millisecond)
			synctest.Wait()
			if store.count() != 1 || l.snapshot().Checkpoint != "" {
				t.Fatalf("first capture: %d imports, checkpoint %q; want one, not kept", store.count(), l.snapshot().Checkpoint)
			}
			time.Sleep(max(checkpointSettle, retryAfter(1, 10*time.Second)))
			synctest.Wait()
			if store.count() != 2 || l.snapshot().Checkpoint == "" {
				t.Fatalf("after settling: %d imports, checkpoint %q; want a second, kept", store.count(), l.snapshot().Checkpoint)
			}
			stop()
		})
	})
	t.Run("changed by every read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := &ckptStore{}
			p, l, dir := runningLease(t, store, time.Now().Add(-time.Minute))
			store.during = func(int) {
				writeNow(t, filepath.Join(dir, "model.pt"))
			}
			stop := startLoop(p, l, dir, 10*time.Second)
			time.Sleep(40 * time.Second)
			synctest.Wait()
			// Every checkpointRetry would be hundreds of whole reads; backing
			// off to the interval, about one an interval once past the first.
			if n := store.count(); n < 4 || n > 14 || l.snapshot().Checkpoint != "" {
				t.Fatalf("%d whole reads of a folder changed by each in 30s of intervals, checkpoint %q; want 4 to 14, none kept", n, l.snapshot().Checkpoint)
			}
			stop()
		})
	})
	t.Run("never settles", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := &ckptStore{}
			p, l, dir := runningLease(t, store, time.Now())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			touching := make(chan struct{})
			go func() {
				defer close(touching)
				for ctx.Err() == nil {
					now := time.Now()
					if err := os.Chtimes(filepath.Join(dir, "model.pt"), now, now); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(checkpointSettle / 3)
				}
			}()
			done := make(chan struct{})
			go func() { defer close(done); l.checkpointLoop(ctx, dir, 2*time.Second) }()
			time.Sleep(4*time.Second - time.Millisecond)
			synctest.Wait()
			if store.count() != 0 {
				t.Fatalf("%d captures of a folder written all the time, before the second interval; want none", store.count())
			}
			time.Sleep(2 * time.Millisecond)
			synctest.Wait()
			if store.count() != 1 || l.snapshot().Checkpoint == "" {
				t.Fatalf("at the second interval: %d imports, checkpoint %q; want one, kept", store.count(), l.snapshot().Checkpoint)
			}
			cancel()
			<-done
			<-touching
			p.tasks.Wait(context.Background())
		})
	})
}

// Captures that read the whole folder in vain back off, to the interval.
func TestRetryAfterBacksOff(t *testing.T) {
	for _, tc := range []struct {
		inVain int
		every  time.Duration
		want   time.Duration
	}{
		{0, 10 * time.Minute, checkpointRetry},
		{1, 10 * time.Minute, 2 * checkpointRetry},
		{4, 10 * time.Minute, 16 * checkpointRetry},
		{40, 10 * time.Minute, 10 * time.Minute},
		{40, time.Second, time.Second},
		{0, time.Millisecond, checkpointRetry},
	} {
		if got := retryAfter(tc.inVain, tc.every); got != tc.want {
			t.Errorf("retryAfter(%d, %v) = %v, want %v", tc.inVain, tc.every, got, tc.want)
		}
	}
}
