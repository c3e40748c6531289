package ui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// fakeLeases are the leases a made-up node provides.
type fakeLeases struct{ live []api.Lease }

func (f fakeLeases) Live(context.Context) ([]api.Lease, error) { return f.live, nil }
func (fakeLeases) History(context.Context, api.LeasesQuery) ([]api.EndedLease, error) {
	return nil, nil
}

// The section "Leases on this node's GPUs", as headless Chromium draws it
// from canned answers, matches testdata/leases.golden: a lease running
// with a checkpoint and billed receipts, one staging with none yet, and
// this node's own job, owed by no one. Run with -update to rewrite the
// file after a deliberate change, and read the diff.
func TestLeasesSectionGolden(t *testing.T) {
	exe := browser(t)
	at := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
	live := []api.Lease{
		{ID: "lq4x7b2kz9m3ar5t", Job: "q3v7kz2mxa4bnc6dpe8f", Name: "train-llm", Submitter: "12D3KooWSubmitterAaaa1111",
			GPUs:      []api.LeaseGPU{{UUID: "GPU-1", Model: "RTX 4090"}, {UUID: "GPU-2", Model: "RTX 4090"}},
			HeldSince: at, EndsBy: at.Add(8 * time.Hour), Limit: 8 * 3600, Phase: "running", RunStart: at.Add(time.Minute),
			CheckpointAt: at.Add(30 * time.Minute), Checkpoints: 3,
			Billed: api.LeaseBilled{Until: at.Add(45 * time.Minute), GPUHours: 1.5, OwedGPUHours: 1.5}},
		{ID: "lstaging00000001", Job: "z9y8x7w6v5u4t3s2r1q0", Submitter: "12D3KooWSubmitterBbbb2222",
			GPUs: []api.LeaseGPU{{UUID: "GPU-3", Model: "RTX 3090"}}, HeldSince: at.Add(40 * time.Minute), EndsBy: at.Add(100 * time.Minute),
			Limit: 3600, Phase: "staging"},
		{ID: "lown000000000001", Job: "o1w2n3j4o5b6o7w8n9j0", Name: "own", Submitter: "12D3KooWSelf0000",
			GPUs: []api.LeaseGPU{{UUID: "GPU-4", Model: "RTX 3090"}}, HeldSince: at.Add(10 * time.Minute), Limit: 3600, Phase: "output",
			Billed: api.LeaseBilled{Until: at.Add(20 * time.Minute), GPUHours: 0.25, Own: true}},
	}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
		Network: fakeNetwork{}, Jobs: fakeJobs{}, Ledger: fakeLedger{}, Logs: fakeLogs{}, Leases: fakeLeases{live},
		Log: slog.New(slog.DiscardHandler),
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom := string(headless(t, ctx, exe, "--dump-dom", srv.URL+"/ui/#job=none"))
	var got strings.Builder
	count := regexp.MustCompile(`<span id="leases-count"[^>]*>[^<]*</span>`).FindString(dom)
	fmt.Fprintf(&got, "== count\n%s\n", count)
	for _, l := range live {
		row := regexp.MustCompile(`<tr class="lease" data-lease="` + l.ID + `">.*?</tr>`).FindString(dom)
		if row == "" {
			t.Fatalf("no row for lease %s in the page:\n%s", l.ID, dom)
		}
		// How long ago is the browser's clock against the test's: not
		// compared.
		row = regexp.MustCompile(`\d+ (s|min|h) ago`).ReplaceAllString(row, "N ago")
		fmt.Fprintf(&got, "== lease %s\n%s\n", l.ID, strings.ReplaceAll(row, "<td", "\n  <td"))
	}
	golden := filepath.Join("testdata", "leases.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestLeasesSectionGolden -update to write it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("the section differs from %s (rerun with -update if the change is meant):\n--- got\n%s--- want\n%s", golden, got.String(), want)
	}
}
