package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/imagebuild"
)

// TestImageJob runs two jobs in an image built here with umoci, on a
// provider that requires images: the job sees the image's files (less the
// one its second layer deletes) and none of the host's, runs as root inside,
// and the second job finds the layers already unpacked.
func TestImageJob(t *testing.T) {
	if missing := imagebuild.Missing(); len(missing) > 0 {
		if os.Getenv("E31_REQUIRE_RUNC") != "" {
			t.Fatalf("%v missing and E31_REQUIRE_RUNC is set: install it (.ci/deps)", missing)
		}
		t.Skipf("apt-get install -y %s", strings.Join(missing, " "))
	}
	requireSandbox(t)
	dir := t.TempDir()
	buildImage(t, dir)
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--grace", "1s", "--require-image"},
		Metrics:       true,
	})
	logs, err := os.ReadFile(filepath.Join(c.Nodes[1].Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "image jobs run here") {
		msg := "the provider cannot run image jobs on this host (see its log: user namespaces, overlay, /etc/subuid)"
		if os.Getenv("E31_REQUIRE_RUNC") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sub := c.Client(0)

	script := `set -e
test -x /bin/busybox
test ! -e /bin/gone.txt
test ! -e /usr/bin/apt
test "$(cat /bin/tool-link)" = "$(cat /bin/tool)"
test "$(id -u)" = 0
echo inside-the-image > /out/result`
	for i, name := range []string{"first", "second"} {
		d := decl("image-"+name, script, 1, time.Minute)
		d.Work.Image = "oci:" + filepath.Join(dir, "layout") + ":v1"
		j := submit(t, sub, d)
		j = waitJob(t, sub, j.ID, 45*time.Second, "release", released)
		if j.Outcome != ledger.OutcomeCompleted {
			t.Fatalf("%s image job ended %s/%s: %s", name, j.Outcome, j.Attribution, j.Reason)
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: out}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "out", "result"))
		if err != nil || strings.TrimSpace(string(b)) != "inside-the-image" {
			t.Fatalf("%s job's output: %q, %v", name, b, err)
		}
		// Two layers: both unpacked by the first job, neither by the second.
		m := scrape(t, c.Nodes[1].Metrics)
		if got := m["e31_image_layers_unpacked_total"]; got != 2 {
			t.Fatalf("after job %d the provider has unpacked %v layers, want 2", i+1, got)
		}
		if got, want := m["e31_image_layer_cache_hits_total"], float64(2*i); got != want {
			t.Fatalf("after job %d the layer cache has %v hits, want %v", i+1, got, want)
		}
	}

	// A job without an image waits: the only provider requires one.
	j := submit(t, sub, decl("no-image", "true", 1, time.Minute))
	waitJob(t, sub, j.ID, 10*time.Second, "a reason naming the image", func(j api.Job) bool {
		return strings.Contains(j.Reason, "image")
	})
}

// buildImage builds a two-layer image with umoci in dir/layout, tagged v1:
// the first layer holds a static busybox, links to it and bin/gone.txt; the
// second deletes gone.txt and adds bin/tool with a hard link to it.
func buildImage(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	b, err := imagebuild.New(ctx, dir, "v1")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Layer(ctx, imagebuild.WithGone("sh", "cat", "test", "id", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Config(ctx, "--config.env", "PATH=/bin"); err != nil {
		t.Fatal(err)
	}
	err = b.Layer(ctx, imagebuild.DeleteAndLink)
	if err != nil {
		t.Fatal(err)
	}
}
