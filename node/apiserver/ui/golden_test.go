package ui_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the page draws")

// A node made up for the page: the fakes answer what the page reads, the
// interfaces they embed (nil) the rest.
type (
	fakeNetwork struct{ nodes, lost []api.Node }
	jobsAPI     = apiserver.Jobs
	fakeJobs    struct {
		jobsAPI
		jobs []api.Job
	}
	fakeLedger struct{ apiserver.Ledger }
	fakeLogs   struct{}
)

func (fakeNetwork) ID() api.ID              { return api.ID{PeerID: "12D3KooWSelf0000", Network: "fake"} }
func (fakeNetwork) Peers() []api.Peer       { return nil }
func (n fakeNetwork) Nodes() []api.Node     { return n.nodes }
func (n fakeNetwork) LostNodes() []api.Node { return n.lost }
func (fakeNetwork) Matches() []api.Match    { return nil }

func (j fakeJobs) Jobs() []api.Job       { return j.jobs }
func (fakeJobs) FullID(id string) string { return id }

func (fakeLedger) All(context.Context) ([]ledger.Entry, error) { return nil, nil }
func (fakeLedger) Usage(context.Context, ledger.UsageFilter, ledger.Policy) (ledger.UsageReport, error) {
	return ledger.UsageReport{}, nil
}

func (fakeLogs) Logs(_ context.Context, id string, _ api.LogOptions, w io.Writer) error {
	_, err := fmt.Fprintf(w, "log of %s\n", id)
	return err
}

// browser finds headless Chromium, skipping the test without it unless
// E31_REQUIRE_BROWSER=1.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "the dashboard's golden test needs headless Chromium (apt-get install -y chromium)"
	if os.Getenv("E31_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// indices is from, from+step, ... below to.
func indices(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// The arrays' rows, as headless Chromium draws them from canned answers,
// match testdata/arrays.golden: an array whose every task failed is red
// with a red bar and its failed indices; one partly withdrawn shows its
// withdrawn part apart; a completed one is green; a running one with
// scattered failures lists the first ranges and counts the rest. The
// network table lists a lost provider as lost. Run with -update to
// rewrite the file after a deliberate change, and read the diff; with
// $E31_ARTIFACTS set, a screenshot of the page is left there.
func TestArrayRowsGolden(t *testing.T) {
	exe := browser(t)
	at := func(s int) time.Time {
		return time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC).Add(time.Duration(s) * time.Second)
	}
	steps := func(n int) []api.Step {
		var out []api.Step
		for i, s := range []api.StepName{api.StepSubmit, api.StepRent, api.StepRun, api.StepOutput, api.StepRelease}[:n] {
			out = append(out, api.Step{Step: s, At: at(10 * i)})
		}
		return out
	}
	jobs := []api.Job{
		{ID: "bafyreiallfailed", Name: "sweep-all-failed", State: api.JobReleased, Outcome: "failed", Submitted: at(0), Steps: steps(5),
			Reason: "200 of 200 tasks failed",
			Tasks:  &api.TaskCounts{ID: "bafyreiallfailed", Total: 200, Failed: 200, FailedIndices: indices(0, 200, 1)}},
		{ID: "bafyreiwithdrawn", Name: "sweep-part-withdrawn", State: api.JobReleased, Outcome: "withdrawn", Submitted: at(1), Steps: steps(5),
			Tasks: &api.TaskCounts{ID: "bafyreiwithdrawn", Total: 50, Completed: 35, Withdrawn: 15}},
		{ID: "bafyreicompleted", Name: "sweep-completed", State: api.JobReleased, Outcome: "completed", Submitted: at(2), Steps: steps(5),
			Tasks: &api.TaskCounts{ID: "bafyreicompleted", Total: 20, Completed: 20}},
		{ID: "bafyreirunning", Name: "sweep-running", State: api.JobRunning, Submitted: at(3), Steps: steps(3),
			Tasks: &api.TaskCounts{ID: "bafyreirunning", Total: 100, Completed: 40, Failed: 14, Running: 6, Queued: 40,
				FailedIndices: append([]int{3, 7, 10, 11, 12, 13, 14}, indices(20, 34, 2)...)}},
	}
	now := time.Now().UTC()
	seen, lostAt := now.Add(-200*time.Second), now.Add(-150*time.Second)
	gpu := []api.GPU{{UUID: "GPU-1", Model: "H100", MemoryBytes: 80 << 30, Free: true}}
	network := fakeNetwork{
		nodes: []api.Node{{PeerID: "12D3KooWProviderUpUpUp1111", GPUs: gpu, CPUs: 16, MemoryBytes: 64 << 30, LastSeen: now}},
		lost:  []api.Node{{PeerID: "12D3KooWProviderLostLost2222", GPUs: gpu, CPUs: 16, MemoryBytes: 64 << 30, LastSeen: seen, LostAt: &lostAt}},
	}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
		Network: network, Jobs: fakeJobs{jobs: jobs}, Ledger: fakeLedger{}, Logs: fakeLogs{}, Log: slog.New(slog.DiscardHandler),
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// #job=none: no row is the chosen one, whatever the newest job.
	dom := string(headless(t, ctx, exe, "--dump-dom", srv.URL+"/ui/#job=none"))
	if dir := os.Getenv("E31_ARTIFACTS"); dir != "" {
		// For a person to look at: the same page, drawn.
		headless(t, ctx, exe, "--window-size=1400,1400", "--screenshot="+filepath.Join(dir, "dashboard-arrays.png"), srv.URL+"/ui/#job=none")
	}

	var got strings.Builder
	for _, j := range jobs {
		row := regexp.MustCompile(`<tr class="job[^"]*" data-job="` + j.ID + `">.*?</tr>`).FindString(dom)
		if row == "" {
			t.Fatalf("no row for %s in the page:\n%s", j.Name, dom)
		}
		fmt.Fprintf(&got, "== %s\n%s\n", j.Name, layout(row))
	}
	for _, n := range append(network.nodes, network.lost...) {
		row := regexp.MustCompile(`<tr class="provider[^"]*" data-peer="` + n.PeerID + `">.*?</tr>`).FindString(dom)
		if row == "" {
			t.Fatalf("no network row for %s in the page:\n%s", n.PeerID, dom)
		}
		// How long ago is the browser's clock against the test's: not
		// compared.
		row = regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z`).ReplaceAllString(row, "TIME")
		row = regexp.MustCompile(`\d+ (s|min|h) ago`).ReplaceAllString(row, "N ago")
		fmt.Fprintf(&got, "== network %s\n%s\n", n.PeerID, layout(row))
	}
	golden := filepath.Join("testdata", "arrays.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestArrayRowsGolden -update to write it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("the rows differ from %s (rerun with -update if the change is meant):\n--- got\n%s--- want\n%s", golden, got.String(), want)
	}
}

// layout puts each cell of a row, and each line of a cell's text, on a
// line of its own, so that a diff of the golden file points at the part
// that changed.
func layout(row string) string {
	r := strings.NewReplacer("<td", "\n  <td", "<br>", "<br>\n    ", `<span class="tasks`, "\n    <span class=\"tasks", `<span class="failed`, "\n    <span class=\"failed")
	return r.Replace(row)
}

// headless runs headless Chromium with args after the flags every page
// test shares (three seconds of virtual time, English, UTC) and returns
// its stdout; a browser that fails fails the test.
func headless(t *testing.T, ctx context.Context, exe string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000", "--lang=en-US"}
	cmd := exec.CommandContext(ctx, exe, append(base, args...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return out
}
