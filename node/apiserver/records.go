package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Records is a Ledger that keeps providers' records (ledger.Ledger).
// Where Config.Ledger is one, GET /v1/peers/{id}/record is served and
// GET /v1/nodes shows each provider's score.
type Records interface {
	ProviderRecords(ctx context.Context) (map[peer.ID]ledger.ProviderRecord, error)
}

// ErrNoRecords answers GET /v1/peers/{id}/record on a server whose
// Ledger keeps no records of providers.
var ErrNoRecords = errors.New("this daemon keeps no records of providers")

// peerRecord answers GET /v1/peers/{id}/record: this node's record of a
// provider, "new" where its ledger names it nowhere.
func (s *Server) peerRecord(r *http.Request) (any, error) {
	id, err := peer.Decode(r.PathValue("id"))
	if err != nil {
		return nil, badRequest(fmt.Errorf("peer %q: %w", r.PathValue("id"), err))
	}
	recs, ok := s.cfg.Ledger.(Records)
	if !ok {
		return nil, ErrNoRecords
	}
	all, err := recs.ProviderRecords(r.Context())
	if err != nil {
		return nil, err
	}
	rec := all[id]
	rec.Provider = id
	return peerRecordOf(rec), nil
}

// peerRecordOf is the API's form of a record.
func peerRecordOf(r ledger.ProviderRecord) api.PeerRecord {
	return api.PeerRecord{
		PeerID: r.Provider.String(), Score: r.Score(), Leases: r.Leases, Completed: r.Completed,
		ProviderCaused: r.ProviderCaused, Disputes: r.Disputes,
		VerificationWins: r.VerificationWins, VerificationLosses: r.VerificationLosses,
		GPUProbeFailures: r.GPUProbeFailures, MedianFirstReceiptSeconds: r.MedianFirstReceipt.Seconds(),
	}
}

// withScores sets each node's Score from this node's records, where the
// ledger keeps them; a node whose records cannot be read is listed
// without.
func (s *Server) withScores(ctx context.Context, nodes []api.Node) []api.Node {
	recs, ok := s.cfg.Ledger.(Records)
	if !ok || len(nodes) == 0 {
		return nodes
	}
	all, err := recs.ProviderRecords(ctx)
	if err != nil {
		s.cfg.Log.Warn("provider records", "err", err)
		return nodes
	}
	for i := range nodes {
		id, err := peer.Decode(nodes[i].PeerID)
		if err != nil {
			continue
		}
		nodes[i].Score = all[id].Score()
	}
	return nodes
}
