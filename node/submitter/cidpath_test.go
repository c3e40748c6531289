package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/acl"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
)

// dagStore holds one DAG, root, with one folder, out, inside it.
type dagStore struct {
	noStore
	root, out cid.Cid
}

func (d dagStore) Resolve(_ context.Context, root cid.Cid, path string) (cid.Cid, error) {
	switch {
	case root != d.root:
		return cid.Undef, content.ErrNotFound
	case path == ".":
		return d.root, nil
	case path == "out":
		return d.out, nil
	}
	return cid.Undef, content.ErrNotFound
}

// A source CID/PATH is resolved at submit to the CID of what it names, so
// that the signed declaration names the exact DAG; a path the DAG lacks, or
// a DAG this node does not hold, is refused naming which.
func TestSubmitResolvesAPathInsideACID(t *testing.T) {
	mk := func(s string) cid.Cid {
		c, err := cid.Decode(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	store := dagStore{root: mk("bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"), out: mk("bafybeih67rk3meeuag462n7lqryoyznpzpnluvp6npi3yxfsvwpybggjnq")}
	sub := wiretest.FreshParty(t)
	s := New(Config{}, Deps{
		Key: sub.SK, Self: sub.ID, Store: store, Ledger: &blockingLedger{}, Calls: noCalls{},
		Gossip: &memGossip{}, Offers: nil, Leases: noLeases{}, Access: acl.New(), Records: &statetest.Records{},
		Metrics: testMetrics(), Log: slog.New(slog.DiscardHandler), Addrs: func() []string { return nil },
	})
	submit := func(source string) (string, error) {
		d := market.NewDeclaration("chained", []string{"true"}, 1, market.Hour, []market.Input{{Source: source, Mount: "/prev"}})
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
		if err != nil {
			return "", err
		}
		r := s.jobs.get(j.ID).snapshot()
		return r.Declaration.Data[0].Source, nil
	}
	got, err := submit(store.root.String() + "/out/")
	if err != nil || got != store.out.String() {
		t.Fatalf("CID/out/ became %q, %v; want %s", got, err, store.out)
	}
	if _, err := submit(store.root.String() + "/nope"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `no "nope" inside`) {
		t.Fatalf("a path the DAG lacks: %v", err)
	}
	other := "bafybeibad37rwgjrkhgix4lsppdiqrbzto54skyx6raptbqedmyia6cbtu"
	if _, err := submit(other + "/out"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "does not hold "+other) {
		t.Fatalf("a DAG not held: %v", err)
	}
}
