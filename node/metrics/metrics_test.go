package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e31network/e31/p2p"
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

type gossipCounts p2p.GossipCounts

func (g gossipCounts) Counts() p2p.GossipCounts { return p2p.GossipCounts(g) }

// Every topic and kind of the gossip's counts is a series, read at scrape
// time, and so is every topic and direction of its bytes.
func TestGossipSeries(t *testing.T) {
	c := p2p.GossipCounts{Messages: map[string]map[string]uint64{}, BytesIn: map[string]uint64{p2p.TopicOffers: 1886}, BytesOut: map[string]uint64{p2p.TopicJobs: 879}}
	for _, topic := range p2p.GossipTopics() {
		c.Messages[topic] = map[string]uint64{}
		for _, k := range p2p.GossipKinds() {
			c.Messages[topic][k] = 0
		}
	}
	c.Messages[p2p.TopicJobs][p2p.KindDuplicate] = 6
	m := New()
	m.registerGossip(gossipCounts(c))
	s := scrape(m)
	for _, want := range []string{
		`e31_gossip_messages_total{kind="duplicate",topic="jobs"} 6`,
		`e31_gossip_messages_total{kind="ihave",topic="none"} 0`,
		`e31_gossip_bytes_total{direction="in",topic="offers"} 1886`,
		`e31_gossip_bytes_total{direction="out",topic="jobs"} 879`,
		`e31_gossip_bytes_total{direction="out",topic="none"} 0`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if n := strings.Count(s, "\ne31_gossip_messages_total{"); n != len(p2p.GossipTopics())*len(p2p.GossipKinds()) {
		t.Errorf("%d message series, want one per topic and kind", n)
	}
}
