package node

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/node/metrics"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// lockedLog is a log sink the test reads.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every where of e31_panics_total is scraped at 0 from the start; a panic
// in an epoch's pass fails that pass only, logged with its stack and
// counted under match.
func TestPanicsCountedFromZero(t *testing.T) {
	var logs lockedLog
	// A node without its views: the pass's first look at them panics.
	n := &Node{log: slog.New(slog.NewTextHandler(&logs, nil)), metrics: metrics.New()}
	n.wireLoops()
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(n.metrics.Gatherer(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	before := scrape()
	for _, w := range []string{"stream", "gossip-validate", "gossip-handle", "bulk", "bitswap", "api", "match", "task", "lease"} {
		if s := `e31_panics_total{where="` + w + `"} 0`; !strings.Contains(before, s) {
			t.Errorf("scrape lacks %s", s)
		}
	}

	n.epochs.Match(7, time.Now(), time.Second) // returns: the panic stops here

	after := scrape()
	if !strings.Contains(after, `e31_panics_total{where="match"} 1`) || !strings.Contains(after, `e31_panics_total{where="stream"} 0`) {
		t.Errorf("after a panic in a pass, scrape:\n%s", after)
	}
	if l := logs.String(); !strings.Contains(l, `level=ERROR msg="panic recovered" where=match panic="runtime error: invalid memory address or nil pointer dereference" epoch=7 stack=`) {
		t.Errorf("log does not show the recovered panic with its stack:\n%s", l)
	}
	n.metrics.Provider.Panics.Inc()
	if !strings.Contains(scrape(), `e31_panics_total{where="lease"} 1`) {
		t.Error("provider.Metrics.Panics does not count under lease")
	}
}
