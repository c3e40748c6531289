package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/testnet/cluster"
)

// Every node asks for its token, which nodes.json names; a cluster given
// one token file hands that token to every node, each keeping it in its
// own data dir, 0600, across a restart.
func TestNodesShareTheTokenGiven(t *testing.T) {
	file := filepath.Join(t.TempDir(), api.TokenFile)
	tok, err := apiserver.LoadOrCreateToken(file)
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, cluster.Options{N: 2, TokenFile: file})
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(c.Nodes[0].Data, "..", cluster.NodesFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []cluster.Node
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if listed[i].TokenFile != n.TokenFile {
			t.Errorf("nodes.json names %q for %s's token, want %q", listed[i].TokenFile, n.Name, n.TokenFile)
		}
		got, err := api.ReadToken(n.TokenFile)
		st, serr := os.Stat(n.TokenFile)
		if err != nil || got != tok || serr != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s keeps %q (%v, mode %v): want the token given, 0600", n.Name, got, err, st.Mode())
		}
		if _, err := n.Client().ID(ctx); err != nil {
			t.Errorf("%s with its token: %v", n.Name, err)
		}
		var se *api.StatusError
		if _, err := api.NewClient(n.API).ID(ctx); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %v, want 401", n.Name, err)
		}
	}
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(1).ID(ctx); err != nil {
		t.Fatalf("after a restart, with the same token: %v", err)
	}
}
