package content

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// syncBuffer is a log sink that serving goroutines may write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A panic while answering a bulk request fails that request only: the
// fetch gets an error, the panic is logged and counted, and the next
// request is served.
func TestBulkPanicFailsOneRequest(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	// The first access check panics, as a bug met by one request would.
	acc := AccessFunc(func(peer.ID, cid.Cid) bool {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return true
	})
	var logs syncBuffer
	var panics []string
	var mu sync.Mutex
	h, err := libp2p.New(libp2p.NoTransports, libp2p.Transport(tcp.NewTCPTransport),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, t.TempDir())
	x, err := NewExchange(ctx, h, s, acc, ExchangeOptions{
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Panicked: func(where string) {
			mu.Lock()
			defer mu.Unlock()
			panics = append(panics, where)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sender := &node{h: h, s: s, x: x}
	t.Cleanup(sender.close)
	receiver := newNode(t, allowOnly(), 0)
	connect(t, receiver, sender)

	src := filepath.Join(t.TempDir(), "in")
	makeTree(t, src, 1)
	root, _, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("fetch from a panicking handler: %v, want the peer's internal error", err)
	}
	mu.Lock()
	got := strings.Join(panics, ",")
	mu.Unlock()
	if got != PanicBulk {
		t.Errorf("panics told: %q, want %q", got, PanicBulk)
	}
	if l := logs.String(); !strings.Contains(l, `msg="panic recovered" where=bulk panic=boom`) || !strings.Contains(l, "stack=") {
		t.Errorf("log does not show the recovered panic with its stack:\n%s", l)
	}
	if st, err := receiver.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{}); err != nil || st.Method != "bulk" {
		t.Fatalf("fetch after the panic: %+v, %v; want it served over bulk", st, err)
	}
}
