package apiserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// fakeLeases answers with fixed leases and keeps the last history query.
type fakeLeases struct {
	live  []api.Lease
	ended []api.EndedLease
	asked *api.LeasesQuery
}

func (f *fakeLeases) Live(context.Context) ([]api.Lease, error) { return f.live, nil }

func (f *fakeLeases) History(_ context.Context, q api.LeasesQuery) ([]api.EndedLease, error) {
	f.asked = &q
	return f.ended, nil
}

// GET /v1/leases lists the live leases; with history=1 the ended ones,
// passing since and max on and refusing what it cannot read; a server
// given no leases says so.
func TestLeasesRoute(t *testing.T) {
	ctx := context.Background()
	held := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
	f := &fakeLeases{
		live:  []api.Lease{{ID: "labc", Job: "j1", Submitter: "12D3sub", GPUs: []api.LeaseGPU{{UUID: "GPU-1", Model: "RTX 4090"}}, HeldSince: held, Phase: "running"}},
		ended: []api.EndedLease{{ID: "lold", Job: "j0", Outcome: "completed", Billed: api.LeaseBilled{GPUHours: 1.5, OwedGPUHours: 1.5}}},
	}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler), Leases: f}))
	t.Cleanup(srv.Close)
	c := api.NewClient(strings.TrimPrefix(srv.URL, "http://"))

	var live []api.Lease
	if err := c.Do(ctx, http.MethodGet, "/v1/leases", nil, nil, &live); err != nil || len(live) != 1 ||
		live[0].ID != "labc" || live[0].GPUs[0].Model != "RTX 4090" || !live[0].HeldSince.Equal(held) || f.asked != nil {
		t.Fatalf("live: %+v, %v", live, err)
	}
	var ended []api.EndedLease
	q := url.Values{"history": {"1"}, "since": {"24h"}, "max": {"5"}}
	before := time.Now()
	if err := c.Do(ctx, http.MethodGet, "/v1/leases", q, nil, &ended); err != nil || len(ended) != 1 || ended[0].Billed.GPUHours != 1.5 {
		t.Fatalf("history: %+v, %v", ended, err)
	}
	if f.asked == nil || f.asked.Max != 5 || f.asked.Since.Before(before.Add(-24*time.Hour-time.Second)) || f.asked.Since.After(time.Now().Add(-24*time.Hour)) {
		t.Fatalf("history asked %+v, want max 5 since 24h ago", f.asked)
	}
	for _, bad := range []url.Values{
		{"since": {"24h"}},
		{"history": {"1"}, "since": {"yesterday"}},
		{"history": {"1"}, "max": {"0"}},
		{"history": {"1"}, "max": {"100000"}},
	} {
		err := c.Do(ctx, http.MethodGet, "/v1/leases", bad, nil, &ended)
		var se *api.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusBadRequest {
			t.Errorf("%v: %v, want 400", bad, err)
		}
	}

	none := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(none.Close)
	nc := api.NewClient(strings.TrimPrefix(none.URL, "http://"))
	err := nc.Do(ctx, http.MethodGet, "/v1/leases", nil, nil, &live)
	var se *api.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusNotImplemented {
		t.Fatalf("a server given no leases: %v, want 501", err)
	}
}
