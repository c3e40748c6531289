package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/submitter"
)

// scriptedLogs writes its pieces, then returns err.
type scriptedLogs struct {
	pieces []string
	err    error
}

func (s scriptedLogs) Logs(_ context.Context, id string, o api.LogOptions, w io.Writer) error {
	for _, p := range s.pieces {
		if _, err := io.WriteString(w, p); err != nil {
			return err
		}
	}
	return s.err
}

func listen(t *testing.T, ui bool, logs apiserver.Logs) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := apiserver.Config{Addr: "127.0.0.1:0", Jobs: jobs{}, Logs: logs, Log: slog.New(slog.DiscardHandler), Access: apiserver.NewAccess(testToken)}
	var srv *apiserver.Server
	var err error
	if ui {
		srv, err = apiserver.ListenUI(ctx, "127.0.0.1:0", cfg)
	} else {
		srv, err = apiserver.Listen(ctx, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Shutdown(context.Background()) })
	return srv.Addr()
}

// The dashboard is served, whole and offline, under /ui/; its own listener
// answers reads only.
func TestDashboardServedReadOnly(t *testing.T) {
	addr := listen(t, true, nil)
	resp, err := withToken.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), `<script src="app.js">`) {
		t.Fatalf("/ led to %s: %.200s", resp.Request.URL, page)
	}
	// Every read fails on this server (it has no network, jobs or
	// ledger): the page still comes, with an empty snapshot, and makes
	// the reads itself.
	if snap := snapshotOf(t, string(page)); snap != "{}" {
		t.Fatalf("snapshot %s, want {}", snap)
	}
	if strings.Contains(string(page), "http://") || strings.Contains(string(page), "https://") {
		t.Fatal("the page loads something from elsewhere")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	for _, asset := range []string{"app.js", "style.css"} {
		r, err := withToken.Get("http://" + addr + "/ui/" + asset)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", asset, err, r.Status)
		}
		r.Body.Close()
	}
	r, err := withToken.Post("http://"+addr+"/v1/jobs", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("a submit on the dashboard's address: %s, want 405", r.Status)
	}
	if _, err := apiserver.ListenUI(context.Background(), "/tmp/x.sock", apiserver.Config{}); err == nil {
		t.Fatal("ListenUI took a unix socket")
	}
}

// A log that fails before its first byte is an HTTP error; one cut after it
// ends with the reason in the trailer, which the client returns.
func TestLogsRouteErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		logs     scriptedLogs
		wantOut  string
		wantErr  error
		wantCode int
	}{
		{"complete", scriptedLogs{pieces: []string{"a\n", "b\n"}}, "a\nb\n", nil, 0},
		{"unknown job", scriptedLogs{err: fmt.Errorf("job x: %w", submitter.ErrNotFound)}, "", nil, http.StatusNotFound},
		{"not yet", scriptedLogs{err: fmt.Errorf("queued: %w", submitter.ErrConflict)}, "", nil, http.StatusConflict},
		{"cut", scriptedLogs{pieces: []string{"a\n"}, err: fmt.Errorf("%w: provider p stopped answering", submitter.ErrLogLost)}, "a\n", api.ErrLogCut, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := api.NewClient(listen(t, false, tc.logs), api.WithToken(testToken))
			var out strings.Builder
			err := cl.Logs(ctx, "x", api.LogOptions{Follow: true}, &out)
			if out.String() != tc.wantOut {
				t.Errorf("printed %q, want %q", out.String(), tc.wantOut)
			}
			var se *api.StatusError
			switch {
			case tc.wantCode != 0:
				if !errors.As(err, &se) || se.Code != tc.wantCode {
					t.Errorf("error %v, want status %d", err, tc.wantCode)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "stopped answering") {
					t.Errorf("error %v, want %v with the reason", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("error %v", err)
			}
		})
	}
}

// snapshotOf is the text of the page's snapshot element.
func snapshotOf(t *testing.T, page string) string {
	t.Helper()
	const open = `<script id="snapshot" type="application/json">`
	if n := strings.Count(page, open); n != 1 {
		t.Fatalf("the page has %d snapshot elements, want 1", n)
	}
	rest := page[strings.Index(page, open)+len(open):]
	end := strings.Index(rest, "</script>")
	if end < 0 {
		t.Fatal("the snapshot element does not end")
	}
	return rest[:end]
}

// What the page reads, made up: a network of one provider, and jobs.
type (
	dashNetwork struct{}
	dashJobs    struct {
		submitterJobs
		jobs *atomic.Pointer[[]api.Job]
	}
	// failingReceipts is a ledger whose receipts cannot be read.
	failingReceipts struct{ apiserver.Ledger }
)

func (dashNetwork) ID() api.ID        { return api.ID{PeerID: "12D3KooWself", Network: "testnet"} }
func (dashNetwork) Peers() []api.Peer { return nil }
func (dashNetwork) Nodes() []api.Node {
	return []api.Node{{PeerID: "12D3KooWprovider", CPUs: 8, LastSeen: time.Unix(1e9, 0).UTC()}}
}
func (dashNetwork) Matches() []api.Match { return nil }

func (j dashJobs) Jobs() []api.Job       { return *j.jobs.Load() }
func (dashJobs) FullID(id string) string { return id }

func (failingReceipts) All(context.Context) ([]ledger.Entry, error) {
	return nil, errors.New("the ledger is unreadable")
}

// hostileName is a job's name, chosen by whoever submitted it, that
// closes the snapshot's element and adds markup that runs.
const hostileName = `</script><img src=x onerror="alert(1)"><!-- & <script>alert(2)</script>`

// The page comes with the answers of the reads it would make first, as
// those reads answer at that moment, each as JSON that no text in it can
// break out of: a job named with markup stays data.
func TestDashboardFirstSnapshot(t *testing.T) {
	l, err := ledger.Open(context.Background(), t.TempDir(), ledger.Options{Self: ledgertest.NewParty(t, 1).ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	jobs := &atomic.Pointer[[]api.Job]{}
	jobs.Store(&[]api.Job{
		{ID: "bafyone", Name: hostileName, State: api.JobQueued, Steps: []api.Step{}, Submitted: time.Unix(1e9, 0).UTC()},
		{ID: "bafytwo", Name: "train", State: api.JobRunning, Provider: "12D3KooWprovider", Submitted: time.Unix(1e9+1, 0).UTC(),
			Attempts: []api.Attempt{{N: 1, ID: "bafytwo", State: api.JobReleased, Outcome: "provider-lost", Checkpoint: "bafyck"},
				{N: 2, ID: "bafytwo2", State: api.JobRunning, StartedFrom: "bafyck"}}},
	})
	cfg := apiserver.Config{Network: dashNetwork{}, Jobs: dashJobs{jobs: jobs}, Ledger: l, Log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(apiserver.Handler(cfg))
	t.Cleanup(srv.Close)
	get := func(path string) (string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", path, resp.Status, err)
		}
		return string(b), resp.Header
	}

	page, h := get("/ui/")
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the page lost package ui's headers: %v", h)
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
	// The hostile name adds no element: the page has its three scripts
	// (the snapshot, leases.js and app.js) and nothing else that the name
	// would make.
	if n := strings.Count(page, "<script"); n != 3 || strings.Contains(page, "<img") || strings.Contains(page, "<!--") {
		t.Fatalf("a job's name was written into the page as markup (%d scripts):\n%s", n, page)
	}
	if !strings.Contains(page, `</script>
<script src="app.js"></script>`) {
		t.Fatal("the page after the snapshot is not whole")
	}
	snap := snapshotOf(t, page)
	if strings.ContainsAny(snap, "<>&") {
		t.Fatalf("the snapshot holds <, > or & as is: %s", snap)
	}
	var parts map[string]json.RawMessage
	if err := json.Unmarshal([]byte(snap), &parts); err != nil {
		t.Fatalf("the snapshot is not JSON: %v\n%s", err, snap)
	}
	// Each part is what the page's own read answers.
	for name, path := range map[string]string{"id": "/v1/id", "nodes": "/v1/nodes?lost=1", "jobs": "/v1/jobs", "receipts": "/v1/receipts", "usage": "/v1/usage"} {
		body, _ := get(path)
		var want, got any
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(parts[name], &got); err != nil {
			t.Fatalf("snapshot part %s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("snapshot part %s is %s, %s answers %s", name, parts[name], path, body)
		}
	}
	var listed []api.Job
	if err := json.Unmarshal(parts["jobs"], &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].Name != hostileName || len(listed[1].Attempts) != 2 || listed[1].Attempts[1].StartedFrom != "bafyck" {
		t.Fatalf("the snapshot's jobs: %+v", listed)
	}

	// The snapshot is taken for each page served, not once.
	more := append(*jobs.Load(), api.Job{ID: "bafythree", Name: "later", State: api.JobQueued})
	jobs.Store(&more)
	page, _ = get("/ui/")
	if err := json.Unmarshal([]byte(snapshotOf(t, page)), &parts); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(parts["jobs"], &listed); err != nil || len(listed) != 3 {
		t.Fatalf("a later page's snapshot has %d jobs (%v), want 3", len(listed), err)
	}

	// A read that fails is left out, the others kept: the page makes
	// that one itself.
	cfg.Ledger = failingReceipts{l}
	srv2 := httptest.NewServer(apiserver.Handler(cfg))
	t.Cleanup(srv2.Close)
	resp, err := http.Get(srv2.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parts = nil
	if err := json.Unmarshal([]byte(snapshotOf(t, string(b))), &parts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "nodes", "jobs", "usage"} {
		if _, ok := parts[name]; !ok {
			t.Errorf("snapshot lacks %s", name)
		}
	}
	if _, ok := parts["receipts"]; ok {
		t.Errorf("snapshot has receipts that could not be read: %s", parts["receipts"])
	}
}
