package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
)

// GET /v1/peers/{id}/record gives the ledger's record of the provider,
// "new" for a peer the ledger does not name, and refuses what is not a
// peer ID.
func TestPeerRecord(t *testing.T) {
	ctx := context.Background()
	cl, l, m := serve(t)
	recs, err := l.ProviderRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := recs[m.Provider.ID]
	if want.Leases != 4 || want.Disputes != 1 {
		t.Fatalf("the ledger's record of the Mixed provider: %+v, want 4 leases, 1 disputed", want)
	}
	got, err := peerRecord(ctx, cl, m.Provider.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.PeerID != m.Provider.ID.String() || got.Score != want.Score() || got.Leases != want.Leases ||
		got.Completed != want.Completed || got.ProviderCaused != want.ProviderCaused || got.Disputes != want.Disputes ||
		got.MedianFirstReceiptSeconds != want.MedianFirstReceipt.Seconds() {
		t.Errorf("record %+v, want %+v", got, want)
	}
	stranger := ledgertest.NewParty(t, 77).ID
	if got, err := peerRecord(ctx, cl, stranger.String()); err != nil || got.Score != "new" || got.Leases != 0 {
		t.Errorf("a stranger's record: %+v, %v; want new", got, err)
	}
	var se *api.StatusError
	if _, err := peerRecord(ctx, cl, "not-a-peer"); !errors.As(err, &se) || se.Code != http.StatusBadRequest {
		t.Errorf("a record for no peer ID: %v, want status 400", err)
	}
}

func peerRecord(ctx context.Context, cl *api.Client, id string) (api.PeerRecord, error) {
	var out api.PeerRecord
	return out, cl.Do(ctx, http.MethodGet, api.PeerRecordPath(id), nil, nil, &out)
}
