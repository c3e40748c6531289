package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// browser finds headless Chromium, skipping the test without it unless
// E31_REQUIRE_BROWSER=1 (CI installs it: .ci/deps).
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "the dashboard test needs headless Chromium (apt-get install -y chromium)"
	if os.Getenv("E31_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// artifacts is where a test leaves files for people to look at:
// $E31_ARTIFACTS if set, else a new folder that outlives the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("E31_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "e31-"+t.Name()+"-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromium runs headless Chromium with args and returns its stdout. Virtual
// time lets the page's requests and a few of its two-second refreshes run
// before the DOM is dumped, without the test waiting that long.
func chromium(t *testing.T, ctx context.Context, exe string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=6000"}
	cmd := exec.CommandContext(ctx, exe, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// The dashboard, loaded in a real browser against a three-node testnet,
// shows every provider, the jobs' five-step timelines, a running job's log
// and the plots; the test saves a screenshot of it.
func TestDashboardInBrowser(t *testing.T) {
	exe := browser(t)
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s"},
	})
	sub := c.Client(0)
	done := submit(t, sub, decl("finished", "echo done", 1, time.Minute))
	done = waitJob(t, sub, done.ID, 60*time.Second, "release", released)
	running := submit(t, sub, decl("still-running", "echo hello from the dashboard job; sleep 120", 1, 5*time.Minute))
	waitJob(t, sub, running.ID, 60*time.Second, "the run", func(j api.Job) bool { return j.State == api.JobRunning })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "http://" + c.Nodes[0].API + "/ui/"
	dom := string(chromium(t, ctx, exe, "--dump-dom", url))

	for _, n := range c.Nodes[1:] {
		if !strings.Contains(dom, fmt.Sprintf(`data-peer="%s"`, n.PeerID)) {
			t.Errorf("the network table does not show provider %s", n.PeerID)
		}
	}
	// The finished job's row has all five steps done; the running one's
	// release is still to come.
	for _, tc := range []struct {
		job  string
		done []string
		todo []string
	}{
		{done.ID, []string{"submit", "rent", "run", "output", "release"}, nil},
		{running.ID, []string{"submit", "rent", "run"}, []string{"release"}},
	} {
		row := regexp.MustCompile(`<tr class="job[^"]*" data-job="` + tc.job + `">.*?</tr>`).FindString(dom)
		if row == "" {
			t.Errorf("no row for job %s", tc.job)
			continue
		}
		for _, s := range tc.done {
			if !strings.Contains(row, `class="step done" data-step="`+s+`"`) {
				t.Errorf("job %s: step %s not shown done", tc.job, s)
			}
		}
		for _, s := range tc.todo {
			if !strings.Contains(row, `class="step todo" data-step="`+s+`"`) {
				t.Errorf("job %s: step %s not shown to come", tc.job, s)
			}
		}
	}
	for _, id := range []string{"plot-gpu-hours", "plot-queue", "plot-wait"} {
		if !regexp.MustCompile(`<svg class="plot"[^>]*data-plot="` + id + `"`).MatchString(dom) {
			t.Errorf("no SVG plot %s", id)
		}
	}
	if !regexp.MustCompile(`<rect [^>]*data-series="completed"`).MatchString(dom) {
		t.Error("the GPU-hours plot has no bar for the completed job")
	}
	if !strings.Contains(dom, "hello from the dashboard job") {
		t.Error("the running job's log is not shown")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}

	shot := filepath.Join(artifacts(t), "dashboard.png")
	chromium(t, ctx, exe, "--screenshot="+shot, "--window-size=1280,900", url)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
