package apiserver

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
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

// scoreLedger keeps a record of one provider.
type scoreLedger struct {
	Ledger
	p peer.ID
}

func (l scoreLedger) ProviderRecords(context.Context) (map[peer.ID]ledger.ProviderRecord, error) {
	return map[peer.ID]ledger.ProviderRecord{l.p: {Provider: l.p, Leases: 3, Completed: 2, ProviderCaused: 1}}, nil
}

// GET /v1/nodes shows each provider's score where the ledger keeps
// records: the known provider's, "new" for another, none without records.
func TestNodesWithScores(t *testing.T) {
	known := ledgertest.NewParty(t, 5).ID
	other := ledgertest.NewParty(t, 6).ID
	in := []api.Node{{PeerID: known.String()}, {PeerID: other.String()}, {PeerID: "not-a-peer"}}
	s := &Server{cfg: Config{Ledger: scoreLedger{p: known}, Log: slog.New(slog.DiscardHandler)}}
	got := s.withScores(context.Background(), slices.Clone(in))
	if got[0].Score != "2 ok/1 bad" || got[1].Score != "new" || got[2].Score != "" {
		t.Errorf("scores %q %q %q, want \"2 ok/1 bad\", \"new\" and none", got[0].Score, got[1].Score, got[2].Score)
	}
	s.cfg.Ledger = struct{ Ledger }{}
	if got := s.withScores(context.Background(), slices.Clone(in)); got[0].Score != "" {
		t.Errorf("a ledger without records gave score %q", got[0].Score)
	}
}
