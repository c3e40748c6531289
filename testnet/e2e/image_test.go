package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// TestImageJob runs two jobs in an image built here with umoci, on a
// provider that requires images: the job sees the image's files (less the
// one its second layer deletes) and none of the host's, runs as root inside,
// and the second job finds the layers already unpacked.
func TestImageJob(t *testing.T) {
	for _, tool := range []string{"umoci", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("E31_REQUIRE_RUNC") != "" {
				t.Fatalf("%s is missing and E31_REQUIRE_RUNC is set: install it (.ci/deps)", tool)
			}
			t.Skipf("%s is missing (apt-get install -y umoci busybox-static)", tool)
		}
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
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal(err)
	}
	umoci := func(args ...string) {
		t.Helper()
		cmd := exec.Command("umoci", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("umoci %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(p string, data []byte, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	umoci("init", "--layout", "layout")
	umoci("new", "--image", "layout:v1")
	umoci("unpack", "--image", "layout:v1", "b1")
	bin := filepath.Join(dir, "b1", "rootfs", "bin")
	data, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(bin, "busybox"), data, 0o755)
	for _, l := range []string{"sh", "cat", "test", "id", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(bin, l)); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "gone.txt"), []byte("deleted in layer 2\n"), 0o644)
	umoci("repack", "--image", "layout:v1", "b1")
	umoci("config", "--image", "layout:v1", "--config.env", "PATH=/bin")
	umoci("unpack", "--image", "layout:v1", "b2")
	bin = filepath.Join(dir, "b2", "rootfs", "bin")
	if err := os.Remove(filepath.Join(bin, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(bin, "tool"), []byte("tool\n"), 0o755)
	if err := os.Link(filepath.Join(bin, "tool"), filepath.Join(bin, "tool-link")); err != nil {
		t.Fatal(err)
	}
	umoci("repack", "--image", "layout:v1", "b2")
}
