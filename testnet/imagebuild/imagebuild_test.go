package imagebuild

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuild builds a two-layer image, the second deleting a file of the
// first, and checks the layout umoci wrote and its archive.
func TestBuild(t *testing.T) {
	if m := Missing(); len(m) > 0 {
		if os.Getenv("E31_REQUIRE_RUNC") != "" {
			t.Fatalf("missing %v and E31_REQUIRE_RUNC is set", m)
		}
		t.Skipf("missing %v", m)
	}
	ctx := context.Background()
	dir := t.TempDir()
	b, err := New(ctx, dir, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Layer(ctx, BusyboxRoot("sh", "cat")); err != nil {
		t.Fatal(err)
	}
	err = b.Layer(ctx, func(root string) error {
		return os.Remove(filepath.Join(root, "bin", "cat"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Config(ctx, "--config.env", "PATH=/bin"); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Ref(), "oci:"+filepath.Join(dir, "layout")+":v1"; got != want {
		t.Errorf("Ref %q, want %q", got, want)
	}

	var index struct {
		Manifests []struct{ Digest string }
	}
	readJSON(t, filepath.Join(b.Layout(), "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("%d manifests, want 1", len(index.Manifests))
	}
	var m struct {
		Config struct{ Digest string }
		Layers []struct{ MediaType, Digest string }
	}
	readJSON(t, blob(b, index.Manifests[0].Digest), &m)
	if len(m.Layers) != 2 {
		t.Fatalf("%d layers, want 2", len(m.Layers))
	}
	var cfg struct{ Config struct{ Env []string } }
	readJSON(t, blob(b, m.Config.Digest), &cfg)
	if !slices.Contains(cfg.Config.Env, "PATH=/bin") {
		t.Errorf("config env %v", cfg.Config.Env)
	}
	if _, err := os.Stat(filepath.Join(dir, "layer-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unpacked bundle was left behind: %v", err)
	}

	out := filepath.Join(dir, "image.tar")
	if err := b.Archive(out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
	}
	for _, want := range []string{"oci-layout", "index.json", "blobs/", strings.TrimPrefix(blob(b, m.Layers[1].Digest), b.Layout()+"/")} {
		if !names[want] {
			t.Errorf("the archive has no %s", want)
		}
	}
}

func blob(b *Builder, digest string) string {
	return filepath.Join(b.Layout(), "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}
