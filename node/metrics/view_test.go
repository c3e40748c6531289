package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What a view's bounds refused and evicted is scraped by reason, from a
// real view: a submitter first in line refused, another's job evicted.
func TestViewSeries(t *testing.T) {
	v := view.NewBoundedMarket(view.Bounds{Jobs: 2})
	now := time.Now()
	body := wire.DeclarationBody{Declaration: market.NewDeclaration("job", []string{"true"}, 1, market.Duration(60_000), nil)}
	for i, sub := range []peer.ID{"a", "a", "a", "b"} {
		v.AddJob(&view.OpenJob{ID: string(rune('0' + i)), Submitter: sub, Body: body, Seen: now, Size: 100})
	}
	m := New()
	m.registerView(v)
	s := scrape(m)
	for _, want := range []string{
		`e31_view_held{what="jobs"} 2`,
		`e31_view_held{what="bytes"} 200`,
		`e31_view_refused_total{reason="jobs"} 1`,
		`e31_view_refused_total{reason="submitter"} 0`,
		`e31_view_evicted_total{reason="jobs"} 1`,
		`e31_view_evicted_total{reason="bytes"} 0`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
