package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func scrape(m *Registry) string {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// Every where of e31_panics_total is scraped at 0 from the start, and the
// roles' counters count under theirs.
func TestPanicsFromZero(t *testing.T) {
	m := New()
	before := scrape(m)
	for _, w := range []string{"stream", "gossip-validate", "gossip-handle", "bulk", "bitswap", "api", "match", "task", "lease"} {
		if s := `e31_panics_total{where="` + w + `"} 0`; !strings.Contains(before, s) {
			t.Errorf("scrape lacks %s", s)
		}
	}
	m.Provider.Panics.Inc()
	m.Submitter.Panics.Inc()
	m.Panicked("match")
	after := scrape(m)
	for _, s := range []string{`e31_panics_total{where="lease"} 1`, `e31_panics_total{where="task"} 1`, `e31_panics_total{where="match"} 1`, `e31_panics_total{where="api"} 0`} {
		if !strings.Contains(after, s) {
			t.Errorf("scrape lacks %s", s)
		}
	}
}

func TestServedByKind(t *testing.T) {
	m := New()
	m.Served(ToProvider, 10)
	m.Served(ToOther, 3)
	m.Served(ToProvider, 5)
	s := scrape(m)
	for _, want := range []string{`e31_content_served_bytes_total{to="provider"} 15`, `e31_content_served_bytes_total{to="other"} 3`} {
		if !strings.Contains(s, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
