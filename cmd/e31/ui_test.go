package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// idNetwork answers who the daemon is, and nothing else.
type idNetwork struct{ apiserver.Network }

func (idNetwork) ID() api.ID { return api.ID{PeerID: "12D3KooWtoken", Network: "testnet"} }

// tokenAPI serves an API on a loopback port with the token kept in a data
// dir's file, and returns its address and that data dir.
func tokenAPI(t *testing.T) (addr, data string) {
	t.Helper()
	data = t.TempDir()
	a, err := apiserver.LoadAccess(filepath.Join(data, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := apiserver.Listen(ctx, apiserver.Config{Addr: "127.0.0.1:0", Network: idNetwork{}, Access: a, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Shutdown(context.Background()) })
	return srv.Addr(), data
}

// e31 finds the token of an API on host:port where it is told
// (--api-token-file, $E31_API_TOKEN_FILE, $E31_API_TOKEN) or in the data
// dir it knows ($E31_DATA); without it the daemon's refusal says where
// the token is.
func TestTokenFound(t *testing.T) {
	addr, data := tokenAPI(t)
	file := filepath.Join(data, api.TokenFile)
	tok, err := api.ReadToken(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		ok   bool
	}{
		{"none", nil, nil, false},
		{"flag", nil, []string{"--api-token-file", file}, true},
		{"file env", map[string]string{"E31_API_TOKEN_FILE": file}, nil, true},
		{"token env", map[string]string{"E31_API_TOKEN": tok}, nil, true},
		{"data dir", map[string]string{"E31_DATA": data}, nil, true},
		{"wrong token", map[string]string{"E31_API_TOKEN": tok[1:] + "0"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("E31_DATA", t.TempDir()) // no token there
			t.Setenv("E31_API_TOKEN", "")
			t.Setenv("E31_API_TOKEN_FILE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			stdout, _, err := e31(t, append(append([]string{"--api", addr}, tc.args...), "id")...)
			switch {
			case tc.ok && (err != nil || !strings.Contains(stdout, "12D3KooWtoken")):
				t.Fatalf("e31 id: %v\n%s", err, stdout)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "--api-token-file")):
				t.Fatalf("e31 id without the token: %v, want the daemon to say where it is", err)
			}
		})
	}
}

// e31 ui prints a one-time link to the dashboard at the API's address.
func TestUILink(t *testing.T) {
	addr, data := tokenAPI(t)
	t.Setenv("E31_DATA", data)
	stdout, _, err := e31(t, "--api", addr, "ui")
	if err != nil || !strings.HasPrefix(stdout, "http://"+addr+"/ui/login?once=") {
		t.Fatalf("e31 ui: %v, %q", err, stdout)
	}
	stdout, _, err = e31(t, "--api", addr, "ui", "--json")
	var link api.UILink
	if err != nil || json.Unmarshal([]byte(stdout), &link) != nil || !strings.Contains(link.URL, "/ui/login?once=") || link.Expires.IsZero() {
		t.Fatalf("e31 ui --json: %v, %q", err, stdout)
	}
	if _, _, err := e31(t, "--api", filepath.Join(os.TempDir(), "none.sock"), "ui"); err == nil {
		t.Fatal("e31 ui with no daemon")
	}
}
