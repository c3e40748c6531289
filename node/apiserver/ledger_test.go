package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/submitter"
)

// jobs answers FullID only: the ledger routes need nothing else of the
// submitter. (The alias names the embedded field apart from the Jobs
// method it promotes.)
type (
	submitterJobs = apiserver.Jobs
	jobs          struct{ submitterJobs }
)

func (jobs) FullID(id string) string { return id }

// LedgerJobs knows no job of this node: the ledger routes count a job by
// its ID, and an array's by its tasks'.
func (jobs) LedgerJobs(id string) (api.JobIDs, error) {
	return api.JobIDs{}, fmt.Errorf("job %s: %w", id, submitter.ErrNotFound)
}

// serve opens a real ledger in a temp dir, fills it with the Mixed
// records, and serves the API on loopback.
func serve(t *testing.T) (*api.Client, *ledger.Ledger, ledgertest.Mixed) {
	t.Helper()
	self := ledgertest.NewParty(t, 1).ID
	l, err := ledger.Open(context.Background(), t.TempDir(), ledger.Options{Self: self})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	m := ledgertest.Fill(t, l)
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
		Jobs: jobs{}, Ledger: l, Log: slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(srv.Close)
	return api.NewClient(strings.TrimPrefix(srv.URL, "http://")), l, m
}

func gpuHours(gpuMinutes float64) float64 { return gpuMinutes / 60 }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestUsage(t *testing.T) {
	ctx := context.Background()
	cl, l, m := serve(t)

	raw, err := cl.Usage(ctx, api.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var rep ledger.UsageReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	want, err := l.Usage(ctx, ledger.UsageFilter{}, ledger.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, want) {
		t.Fatalf("served report differs from the ledger's:\n%+v\n%+v", rep, want)
	}
	totals := map[string]ledger.UsageTotal{}
	for _, u := range rep.ByPeer {
		if u.Role != ledger.RoleSubmitter {
			t.Errorf("counterpart %s as %s: this node is the provider of every lease", u.Peer, u.Role)
		}
		totals[u.Peer.String()] = u
	}
	// sub: completed 6, lost 8 (one-sided, not owed), settled 4.
	// sub2: disputed 4 (our version: owed, one party's word).
	for who, w := range map[string][3]float64{
		m.Submitter.ID.String():  {gpuHours(6 + 8 + 4), gpuHours(6 + 4), gpuHours(8)},
		m.Submitter2.ID.String(): {gpuHours(4), gpuHours(4), gpuHours(4)},
	} {
		g := totals[who]
		if !near(g.GPUHours, w[0]) || !near(g.Owed, w[1]) || !near(g.OneSided, w[2]) {
			t.Errorf("%s: held %v owed %v one-sided %v, want %v", who, g.GPUHours, g.Owed, g.OneSided, w)
		}
	}
	if len(rep.ByModel) != 1 || rep.ByModel[0].GPUModel != "H100" || !near(rep.ByModel[0].GPUHours, gpuHours(22)) {
		t.Errorf("by model: %+v", rep.ByModel)
	}
	if !reflect.DeepEqual(rep.Policy, ledger.DefaultPolicy()) {
		t.Errorf("policy %+v, want the default", rep.Policy)
	}

	// One counterpart, from one minute in: every lease loses a minute.
	raw, err = cl.Usage(ctx, api.UsageQuery{Since: ledgertest.T0.Add(time.Minute), Peer: m.Submitter2.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	rep = ledger.UsageReport{}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.ByPeer) != 1 || rep.ByPeer[0].Peer != m.Submitter2.ID || !near(rep.ByPeer[0].GPUHours, gpuHours(2)) {
		t.Errorf("sub2 since T0+1m: %+v", rep.ByPeer)
	}

	for _, q := range []string{"since=yesterday", "since=-1h", "peer=nobody"} {
		resp, err := http.Get("http://" + cl.Addr() + "/v1/usage?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, resp.StatusCode)
		}
	}
}

func TestReceiptsExport(t *testing.T) {
	ctx := context.Background()
	cl, l, m := serve(t)

	var buf bytes.Buffer
	if _, err := cl.ExportReceipts(ctx, "", &buf); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.VerifyExport(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// Two-sided: 3 completed + 2 lost + 1 disputed + 2 settled; four
	// leases, each signed before held time was bounded.
	want := ledger.ExportReport{Entries: m.Entries, TwoSided: 8, OneSided: 1, Superseded: 1, Disputes: 1, Unbounded: 4, Held: rep.Held}
	if rep != want || rep.Held.Leases != 4 {
		t.Fatalf("export of everything: %+v, want %+v", rep, want)
	}

	buf.Reset()
	if _, err := cl.ExportReceipts(ctx, m.Lost.Job, &buf); err != nil {
		t.Fatal(err)
	}
	if rep, err = ledger.VerifyExport(&buf); err != nil || rep != (ledger.ExportReport{Entries: 3, TwoSided: 2, OneSided: 1, Unbounded: 1, Held: rep.Held}) || rep.Held.OwedGPUHours != 0 {
		t.Fatalf("export of job %s: %+v, %v", m.Lost.Job, rep, err)
	}

	// A store that cannot be read fails before the file starts: the
	// client gets the error, not an empty file.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	n, err := cl.ExportReceipts(ctx, "", &buf)
	var se *api.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusInternalServerError || n != 0 {
		t.Fatalf("export from a closed ledger: %d bytes, %v", n, err)
	}
}

func TestReceiptsListDisputesAndSuperseded(t *testing.T) {
	ctx := context.Background()
	cl, _, m := serve(t)
	res, err := cl.Receipts(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	var rs []ledger.Receipt
	if err := json.Unmarshal(res.Receipts, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != m.Entries-1 {
		t.Fatalf("%d receipts, want every entry but the dispute (%d)", len(rs), m.Entries-1)
	}
	for _, r := range rs {
		if r.Lease == "" {
			t.Fatalf("a zero receipt in the list: %+v", r)
		}
	}
	if len(res.Superseded) != 1 {
		t.Fatalf("superseded %v, want one", res.Superseded)
	}
	if r := rs[res.Superseded[0]]; r.Lease != m.Settled.ID || !r.OneSided() {
		t.Errorf("superseded names %s (signer %q), want the settled lease's one-sided record", r.Lease, r.Signer)
	}
	if len(res.Disputes) != 1 || res.Disputes[0].Lease != m.Disputed.ID || res.Disputes[0].Superseded {
		t.Fatalf("disputes %+v", res.Disputes)
	}
	var ours, theirs ledger.Receipt
	if err := json.Unmarshal(res.Disputes[0].Ours, &ours); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.Disputes[0].Theirs, &theirs); err != nil {
		t.Fatal(err)
	}
	if ours.Signer != ledger.SignerProvider || theirs.Signer != ledger.SignerSubmitter || ours.Verify() != nil || theirs.Verify() != nil {
		t.Errorf("dispute versions: ours by %q, theirs by %q", ours.Signer, theirs.Signer)
	}
	v := res.Verify
	if v == nil || !v.OK || v.Entries != m.Entries || v.OneSided != 1 || v.Disputed != 1 {
		t.Fatalf("verify %+v", v)
	}
}

// The export route takes the ledger's other filters too, and answers JSON.
func TestExportByLease(t *testing.T) {
	cl, _, _ := serve(t)
	resp, err := http.Get("http://" + cl.Addr() + "/v1/receipts/export?lease=completed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !bytes.HasPrefix(b, []byte(`{"format":"e31-receipts/1"`)) {
		t.Fatalf("content type %q, body %.60s", ct, b)
	}
	rep, err := ledger.VerifyExport(bytes.NewReader(b))
	if err != nil || rep != (ledger.ExportReport{Entries: 3, TwoSided: 3, Unbounded: 1, Held: rep.Held}) || rep.Held.Leases != 1 {
		t.Fatalf("export of lease completed: %+v, %v", rep, err)
	}
}

// TestUsageOfArray checks that usage of an array sums its tasks' leases,
// and no other job's, however alike its ID.
func TestUsageOfArray(t *testing.T) {
	ctx := context.Background()
	cl, l, m := serve(t)
	done := ledger.Cause{Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}
	for i, job := range []string{"arr.0", "arr.1", "arr.1", "arr.01", "arrx.0", "arr"} {
		lease := ledgertest.Lease{ID: fmt.Sprint("a", i), Job: job, Provider: m.Provider, Submitter: m.Submitter,
			GPUs: 1, GPUModel: "H100", From: ledgertest.T0}
		for _, r := range lease.Chain(t, 2, &done) {
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for job, want := range map[string]int{"arr": 4, "arr.1": 2, "arrx": 1, "nothing": 0} {
		raw, err := cl.Usage(ctx, api.UsageQuery{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		var rep ledger.UsageReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rep.Rows {
			n += r.Leases
		}
		// Each lease holds one GPU for two receipts' time.
		if n != want || len(rep.ByPeer) > 1 || (want > 0 && !near(rep.ByPeer[0].GPUHours, float64(want)*gpuHours(2))) {
			t.Errorf("usage of %s: %d leases, %+v; want %d leases", job, n, rep.ByPeer, want)
		}
	}
}
