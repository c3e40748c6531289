package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// TestNewRefusesIdentityWithForeignPublicHalf: an identity key file whose
// public half was edited names a peer ID its seed cannot sign for. The node
// refuses to start, naming the file, rather than gossip and sign what every
// peer would reject.
func TestNewRefusesIdentityWithForeignPublicHalf(t *testing.T) {
	dir := t.TempDir()
	sk, err := p2p.LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sk.Raw()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := other.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	copy(raw[32:], pub)
	bad, err := crypto.UnmarshalEd25519PrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	data, err := crypto.MarshalPrivateKey(bad)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, p2p.IdentityFile)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := New(ctx, Config{DataDir: dir, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0"})
	if err == nil {
		cancel()
		_ = n.Run(ctx) // closes what New opened
		t.Fatal("a node started on an identity key whose halves disagree")
	}
	if !errors.Is(err, ledger.ErrKeyHalves) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q: want ErrKeyHalves naming %s", err, path)
	}
}
