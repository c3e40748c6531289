package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/imagebuild"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
	img := buildImage(t, dir)
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
		if j.Outcome != string(ledger.OutcomeCompleted) {
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

	// With no command the image's own Cmd runs; an image with neither
	// Entrypoint nor Cmd is refused at submit, naming why.
	d := decl("image-cmd", "", 1, time.Minute)
	d.Work.Command, d.Work.Image = nil, img.Ref()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil); err == nil || !strings.Contains(err.Error(), "neither Entrypoint nor Cmd") {
		t.Fatalf("no command, and an image with nothing to run: %v", err)
	}
	if err := img.Config(context.Background(), "--config.cmd", "sh", "--config.cmd", "-c", "--config.cmd", "echo from-the-image-cmd > /out/result"); err != nil {
		t.Fatal(err)
	}
	j := submit(t, sub, d)
	if j = waitJob(t, sub, j.ID, 45*time.Second, "release", released); j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("the image's Cmd ended %s/%s: %s", j.Outcome, j.Attribution, j.Reason)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := sub.Get(context.Background(), j.ID, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "result")); err != nil || strings.TrimSpace(string(b)) != "from-the-image-cmd" {
		t.Fatalf("the image's Cmd wrote %q, %v", b, err)
	}

	// A job without an image waits: the only provider requires one.
	j = submit(t, sub, decl("no-image", "true", 1, time.Minute))
	waitJob(t, sub, j.ID, 10*time.Second, "a reason naming the image", func(j api.Job) bool {
		return strings.Contains(j.Reason, "image")
	})
}

// buildImage builds a two-layer image with umoci in dir/layout, tagged v1:
// the first layer holds a static busybox, links to it and bin/gone.txt; the
// second deletes gone.txt and adds bin/tool with a hard link to it. Its
// config sets PATH, and no Entrypoint or Cmd.
func buildImage(t *testing.T, dir string) *imagebuild.Builder {
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
	return b
}

// TestImagePulledByDigest submits a job whose image is a registry tag, on a
// registry served here on 127.0.0.1: the submitter resolves the tag to a
// digest and signs that, and a provider started with --image-pull pulls the
// image from the registry by that digest rather than from the submitter.
func TestImagePulledByDigest(t *testing.T) {
	if missing := imagebuild.Missing(); len(missing) > 0 {
		if os.Getenv("E31_REQUIRE_RUNC") != "" {
			t.Fatalf("%v missing and E31_REQUIRE_RUNC is set: install it (.ci/deps)", missing)
		}
		t.Skipf("apt-get install -y %s", strings.Join(missing, " "))
	}
	requireSandbox(t)
	dir := t.TempDir()
	buildImage(t, dir)
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("layout index: %v (%d manifests)", err, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tag, err := name.NewTag(host+"/e31/busybox:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}

	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--grace", "1s", "--require-image", "--image-pull"},
	})
	sub := c.Client(0)
	d := decl("pulled", "test ! -e /bin/gone.txt && test -x /bin/busybox && echo pulled > /out/result", 1, time.Minute)
	d.Work.Image = "docker://" + tag.String()
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 45*time.Second, "release", released)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("job ended %s/%s: %s", j.Outcome, j.Attribution, j.Reason)
	}
	logs, err := os.ReadFile(filepath.Join(c.Nodes[1].Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	var pulled string
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "image pulled") {
			pulled = line
		}
	}
	if pulled == "" || !strings.Contains(pulled, host+"/e31/busybox@sha256:") {
		t.Fatalf("the provider did not pull the image by digest from the registry: %q", pulled)
	}
}
