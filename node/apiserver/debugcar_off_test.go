//go:build !byzantine

package apiserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e31network/e31/node/apiserver"
	"github.com/ipfs/go-cid"
)

// A default build serves no POST /v1/debug/car, even with Config.PutCAR
// set: the raw-content hook is in the byzantine build only.
func TestNoDebugCARInADefaultBuild(t *testing.T) {
	called := false
	put := func(context.Context, io.Reader) ([]cid.Cid, error) { called = true; return nil, nil }
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler), PutCAR: put}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/debug/car", "application/vnd.ipld.car", strings.NewReader("car"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || called {
		t.Fatalf("a default build answered POST /v1/debug/car with %s (PutCAR called: %v)", resp.Status, called)
	}
}
