//go:build byzantine

package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/ipfs/go-cid"
)

// POST /v1/debug/car is served only where Config.PutCAR is set (a daemon
// playing a hostile submitter); it answers with the roots, and a CAR the
// store refuses is the client's error.
func TestDebugCAROnlyWhenAsked(t *testing.T) {
	root, err := cid.Decode("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	put := func(_ context.Context, r io.Reader) ([]cid.Cid, error) {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		got = string(b)
		if got == "bad" {
			return nil, fmt.Errorf("put car: %w", content.ErrInvalidData)
		}
		return []cid.Cid{root}, nil
	}
	log := slog.New(slog.DiscardHandler)
	off := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: log}))
	defer off.Close()
	on := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: log, PutCAR: put}))
	defer on.Close()

	resp, err := http.Post(off.URL+"/v1/debug/car", "application/vnd.ipld.car", strings.NewReader("car"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("a daemon without PutCAR answered POST /v1/debug/car with %s", resp.Status)
	}

	cl := api.NewClient(strings.TrimPrefix(on.URL, "http://"))
	res, err := cl.PutCAR(context.Background(), strings.NewReader("car"))
	if err != nil || len(res.Roots) != 1 || res.Roots[0] != root.String() || got != "car" {
		t.Fatalf("PutCAR: %+v, %v (the server read %q)", res, err, got)
	}
	_, err = cl.PutCAR(context.Background(), strings.NewReader("bad"))
	var se *api.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadRequest || !strings.Contains(se.Msg, "does not match") {
		t.Fatalf("a CAR the store refuses: %v, want 400 saying why", err)
	}
}
