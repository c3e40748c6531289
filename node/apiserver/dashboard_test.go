package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

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
	cfg := apiserver.Config{Addr: "127.0.0.1:0", Jobs: jobs{}, Logs: logs, Log: slog.New(slog.DiscardHandler)}
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
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), `<script src="app.js">`) {
		t.Fatalf("/ led to %s: %.200s", resp.Request.URL, page)
	}
	if strings.Contains(string(page), "http://") || strings.Contains(string(page), "https://") {
		t.Fatal("the page loads something from elsewhere")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	for _, asset := range []string{"app.js", "style.css"} {
		r, err := http.Get("http://" + addr + "/ui/" + asset)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", asset, err, r.Status)
		}
		r.Body.Close()
	}
	r, err := http.Post("http://"+addr+"/v1/jobs", "application/json", strings.NewReader(`{}`))
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
			cl := api.NewClient(listen(t, false, tc.logs))
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
