package apiserver

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
)

type lostNetwork struct{ Network }

func (lostNetwork) Nodes() []api.Node { return []api.Node{{PeerID: "up"}} }
func (lostNetwork) LostNodes() []api.Node {
	at := time.Unix(1e9, 0).UTC()
	return []api.Node{{PeerID: "gone", LostAt: &at}}
}

// GET /v1/nodes lists the providers in view; with ?lost=1 those lost
// lately follow, from a Network that remembers them.
func TestNodesWithLost(t *testing.T) {
	for _, tc := range []struct {
		n     Network
		query string
		want  []string
	}{
		{lostNetwork{}, "", []string{"up"}},
		{lostNetwork{}, "?lost=1", []string{"up", "gone"}},
		{lostNetwork{}, "?lost=false", []string{"up"}},
		{struct{ Network }{lostNetwork{}}, "?lost=1", []string{"up"}}, // no LostNodes
	} {
		got := nodes(tc.n, httptest.NewRequest("GET", "/v1/nodes"+tc.query, nil))
		var ids []string
		for _, n := range got {
			ids = append(ids, n.PeerID)
		}
		if len(ids) != len(tc.want) || (len(ids) == 2 && (ids[1] != "gone" || got[1].LostAt == nil)) {
			t.Errorf("%s: %v, want %v", tc.query, ids, tc.want)
		}
	}
}
