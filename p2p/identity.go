package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// IdentityFile is the name of the private key file inside a node's data dir.
const IdentityFile = "identity.key"

// LoadOrCreateIdentity reads the node's Ed25519 key from dir, creating it on
// first start. A key file that exists but cannot be read or parsed is an
// error: silently minting a new identity would orphan every lease, receipt and
// pin that the old peer ID is a party to.
func LoadOrCreateIdentity(dir string) (crypto.PrivKey, error) {
	path := filepath.Join(dir, IdentityFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		sk, err := crypto.UnmarshalPrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("identity key %s is corrupt (move it away only if you mean to start as a new peer): %w", path, err)
		}
		if sk.Type() != crypto.Ed25519 {
			return nil, fmt.Errorf("identity key %s is %s, want Ed25519", path, sk.Type())
		}
		return sk, nil
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("read identity key: %w", err)
	}

	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate identity key: %w", err)
	}
	data, err = crypto.MarshalPrivateKey(sk)
	if err != nil {
		return nil, fmt.Errorf("marshal identity key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// Write to a temporary file and rename so that a crash never leaves a
	// truncated key behind, which the next start would refuse.
	tmp, err := os.CreateTemp(dir, IdentityFile+".*")
	if err != nil {
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	return sk, nil
}
