package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// panickyNetwork panics on GET /v1/id, a bug a request reached, and
// answers GET /v1/peers.
type panickyNetwork struct{ apiserver.Network }

func (panickyNetwork) ID() api.ID        { panic("id bug") }
func (panickyNetwork) Peers() []api.Peer { return nil }

// panickyLogs starts a log's response, then panics.
type panickyLogs struct{}

func (panickyLogs) Logs(_ context.Context, _ string, _ api.LogOptions, w io.Writer) error {
	_, _ = io.WriteString(w, "first line\n")
	panic("logs bug")
}

// syncLog is a log sink written by the server's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A request whose handler panics is answered 500, logged with its stack
// and counted, and the server answers the next one. Once the response has
// begun it is cut off instead, so it cannot pass for a whole one.
func TestPanicAnswers500AndCounts(t *testing.T) {
	var mu sync.Mutex
	var told []string
	var logs syncLog
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
		Network: panickyNetwork{}, Jobs: jobs{}, Logs: panickyLogs{},
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Panicked: func(where string) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, where)
		},
	}))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/v1/id")
	if err != nil {
		t.Fatal(err)
	}
	var e api.Error
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || err != nil || e.Error != "internal error" {
		t.Fatalf("GET /v1/id whose handler panics: %s, %+v (%v); want 500 internal error", resp.Status, e, err)
	}
	if l := logs.String(); !strings.Contains(l, `level=ERROR msg="panic recovered" where=api panic="id bug" method=GET path=/v1/id stack=`) {
		t.Errorf("log does not show the recovered panic with its stack:\n%s", l)
	}

	resp, err = http.Get(srv.URL + "/v1/peers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/peers after a panic: %s, want 200", resp.Status)
	}

	resp, err = http.Get(srv.URL + "/v1/jobs/j1/logs")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil || string(b) != "first line\n" {
		t.Errorf("logs that panic once begun: %s, %q, %v; want the first line, then a broken body", resp.Status, b, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if strings.Join(told, ",") != apiserver.PanicAPI+","+apiserver.PanicAPI {
		t.Errorf("panics told %q, want two of %q", told, apiserver.PanicAPI)
	}
}
