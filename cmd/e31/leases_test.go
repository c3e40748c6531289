package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// leasesDaemon is a daemon's leases: fixed live and ended ones, and the
// last history query asked.
type leasesDaemon struct {
	live  []api.Lease
	ended []api.EndedLease
	asked *api.LeasesQuery
}

func (d *leasesDaemon) Live(context.Context) ([]api.Lease, error) { return d.live, nil }

func (d *leasesDaemon) History(_ context.Context, q api.LeasesQuery) ([]api.EndedLease, error) {
	d.asked = &q
	return d.ended, nil
}

// e31 leases prints what runs on the node's GPUs as a table or as JSON,
// and --history what ended, with --since and --max passed on.
func TestLeasesCommand(t *testing.T) {
	now := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	sub := "12D3KooWQmQ2xTDVvq1Vb5cbm5RnC4gM9r3Yy7pUeVrTtSbmitter"
	d := &leasesDaemon{
		live: []api.Lease{{ID: "lq4x7b2kz9m3ar5t", Job: "q3v7kz2mxa4bnc6dpe8f", Name: "train-llm", Submitter: sub,
			GPUs:      []api.LeaseGPU{{UUID: "GPU-1", Model: "RTX 4090"}, {UUID: "GPU-2", Model: "RTX 4090"}},
			HeldSince: now.Add(-2 * time.Hour), EndsBy: now.Add(6 * time.Hour), Limit: 8 * 3600, Phase: "running",
			Billed: api.LeaseBilled{Until: now.Add(-time.Minute), GPUHours: 3.967, OwedGPUHours: 3.967}}},
		ended: []api.EndedLease{
			{ID: "lold1", Job: "j1", Submitter: sub, GPUs: 1, GPUModel: "RTX 4090", HeldFrom: now.Add(-30 * time.Hour), HeldUntil: now.Add(-28 * time.Hour),
				Outcome: "completed", Attribution: "job", Record: "two-sided", Billed: api.LeaseBilled{GPUHours: 2, OwedGPUHours: 2}},
			{ID: "lold2", Job: "j2", Submitter: sub, GPUs: 1, HeldFrom: now.Add(-40 * time.Hour), HeldUntil: now.Add(-39 * time.Hour),
				Outcome: "provider-lost", Attribution: "provider", Record: "two-sided", Billed: api.LeaseBilled{GPUHours: 1}},
		},
	}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler), Leases: d}))
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
	ctx := context.Background()

	if err := runLeases(ctx, leasesOptions{}, g, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lq4x7b2kz9m3ar5t", "q3v7kz2mxa4bnc6dpe8f", "train-llm", shortID(sub), "2× RTX 4090", "running", "(2h0m0s)", "3.967", "1 lease;"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runLeases(ctx, leasesOptions{json: true}, g, now); err != nil {
		t.Fatal(err)
	}
	var live []api.Lease
	if err := json.Unmarshal([]byte(out.String()), &live); err != nil || len(live) != 1 || live[0].Submitter != sub ||
		live[0].Phase != "running" || len(live[0].GPUs) != 2 || live[0].Billed.GPUHours != 3.967 {
		t.Fatalf("json: %v\n%s", err, out.String())
	}

	out.Reset()
	if err := runLeases(ctx, leasesOptions{history: true, since: "48h", max: 5}, g, now); err != nil {
		t.Fatal(err)
	}
	if d.asked == nil || d.asked.Max != 5 || !d.asked.Since.Equal(now.Add(-48*time.Hour)) {
		t.Fatalf("history asked %+v, want max 5 since %v", d.asked, now.Add(-48*time.Hour))
	}
	for _, want := range []string{"completed (job)", "provider-lost (provider)", "1× RTX 4090", "2 leases: held 3.000 GPU-h, owed 2.000, not owed 1.000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("history lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runLeases(ctx, leasesOptions{history: true, json: true}, g, now); err != nil {
		t.Fatal(err)
	}
	var ended []api.EndedLease
	if err := json.Unmarshal([]byte(out.String()), &ended); err != nil || len(ended) != 2 || ended[1].Outcome != "provider-lost" {
		t.Fatalf("history json: %v\n%s", err, out.String())
	}

	for _, o := range []leasesOptions{{since: "24h"}, {max: 3}, {history: true, since: "yesterday"}, {history: true, max: -1}} {
		if err := runLeases(ctx, o, g, now); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}

	d.live = nil
	out.Reset()
	if err := runLeases(ctx, leasesOptions{}, g, now); err != nil || !strings.Contains(out.String(), "no lease runs on this node's GPUs") {
		t.Fatalf("no lease: %v\n%s", err, out.String())
	}
}
