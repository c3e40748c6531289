package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
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
	return chromiumFor(t, ctx, exe, 6*time.Second, args...)
}

// chromiumFor is chromium with budget of virtual time: 3s lets the page
// draw and refresh once.
func chromiumFor(t *testing.T, ctx context.Context, exe string, budget time.Duration, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds())}
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
	dom := string(chromium(t, ctx, exe, "--dump-dom", uiLink(t, ctx, c.Nodes[0])))

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
	chromium(t, ctx, exe, "--screenshot="+shot, "--window-size=1280,900", uiLink(t, ctx, c.Nodes[0]))
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}

// uiLink is a one-time link to n's dashboard, as e31 ui prints it: opened
// in a fresh browser, it logs that browser in and leads to the dashboard.
// A fragment added to it (#page=2) is kept through the redirect.
func uiLink(t *testing.T, ctx context.Context, n *cluster.Node) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin.E31, "--api", n.API, "ui").Output()
	link := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(link, "http://"+n.API+"/ui/login?once=") {
		t.Fatalf("e31 ui: %v, %q", err, out)
	}
	return link
}

// jobRowRE finds the jobs table's rows, one a job, in a dumped DOM.
var jobRowRE = regexp.MustCompile(`<tr class="job[^"]*" data-job="([^"]+)">`)

// jobRows are the IDs of the jobs a dumped DOM's jobs table shows, top to
// bottom.
func jobRows(dom string) []string {
	var out []string
	for _, m := range jobRowRE.FindAllStringSubmatch(dom, -1) {
		out = append(out, m[1])
	}
	return out
}

// textOf is the text of the element with id in a dumped DOM, where that
// text has no markup in it.
func textOf(dom, id string) string {
	m := regexp.MustCompile(`id="` + id + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return m[1]
}

// domText is s as a DOM dump writes it in text.
var domText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\u00a0", "&nbsp;").Replace

// peerCell is how the page shows a peer ID: its end, whole on hover.
func peerCell(id string) string {
	return `<span class="peer" title="` + id + `">…` + id[len(id)-8:] + `</span>`
}

// ids are the IDs of jobs.
func ids(jobs []api.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// The dashboard of a node with 200 jobs: its first paint has them (the
// page carries a snapshot, drawn before any request), a page shows 50 of
// them newest first, the state and name filter in the address narrows
// them and holds across refreshes, a resumed job lists its attempts, and
// every provider is shown by the end of its ID with the whole ID on hover.
// Most of the jobs ask for more GPUs than any provider has, so they wait
// and cost nothing; a name that is markup stays text. Each view is its own
// browser, run side by side.
func TestDashboardManyJobs(t *testing.T) {
	exe := browser(t)
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s"},
	})
	sub, provider := c.Client(0), c.Nodes[1].PeerID
	// The views run after this function returns (t.Parallel), before the
	// cleanups.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)

	// Two jobs that run; the second is run again from the start, so that
	// it has two attempts.
	done := submit(t, sub, decl("echo-done", "echo done", 1, time.Minute))
	again := submit(t, sub, decl("echo-again", "echo again", 1, time.Minute))
	waitJob(t, sub, done.ID, 60*time.Second, "release", released)
	waitJob(t, sub, again.ID, 60*time.Second, "release", released)
	if _, err := sub.Submit(ctx, api.SubmitRequest{ResumeOf: again.ID, FromStart: true}, nil); err != nil {
		t.Fatal(err)
	}
	again = waitJob(t, sub, again.ID, 60*time.Second, "the second attempt's release", func(j api.Job) bool {
		return len(j.Attempts) == 2 && released(j)
	})
	const hostile = `</script><img src=x onerror="document.title='injected'">`
	submit(t, sub, decl(hostile, "true", 4, time.Minute))
	submit(t, sub, decl("echo-waits", "true", 4, time.Minute))
	for i := range 196 {
		submit(t, sub, decl(fmt.Sprintf("bulk-%03d", i), "true", 4, time.Minute))
	}
	all, err := sub.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 200 {
		t.Fatalf("the node lists %d jobs, want 200", len(all))
	}
	newest := slices.Clone(all)
	slices.SortStableFunc(newest, func(a, b api.Job) int { return b.Submitted.Compare(a.Submitted) })
	named := func(names ...string) []string {
		var out []string
		for _, j := range newest {
			if slices.Contains(names, j.Name) {
				out = append(out, j.ID)
			}
		}
		return out
	}
	bulk := func(from, to int) []string {
		var names []string
		for i := from; i <= to; i++ {
			names = append(names, fmt.Sprintf("bulk-%03d", i))
		}
		return named(names...)
	}

	base := "http://" + c.Nodes[0].API + "/ui/"
	check := func(t *testing.T, dom string, wantRows []string, wantPage string) {
		t.Helper()
		if got := jobRows(dom); !slices.Equal(got, wantRows) {
			t.Errorf("rows %v,\nwant %v", got, wantRows)
		}
		if got := textOf(dom, "jobs-page"); got != wantPage {
			t.Errorf("pager says %q, want %q", got, wantPage)
		}
		if strings.Contains(dom, "<img") || !strings.Contains(dom, "<title>E31 node</title>") {
			t.Error("a job's name was read as markup")
		}
	}

	// The first paint, with no API to read: the page as served, opened
	// from files, where every request it makes fails.
	t.Run("first paint", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, f := range []string{"", "leases.js", "app.js", "style.css"} {
			b := httpGet(t, base+f, c.Nodes[0])
			if f == "" {
				f = "index.html"
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dom := string(chromium(t, ctx, exe, "--dump-dom", "file://"+filepath.Join(dir, "index.html")))
		check(t, dom, ids(newest[:50]), "page 1 of 4, 200 jobs")
		if !strings.Contains(dom, `data-first="snapshot"`) {
			t.Error("the page was not first drawn from its snapshot")
		}
		if !strings.Contains(textOf(dom, "updated"), "cannot reach the node") {
			t.Errorf("the page read an API from files? updated %q", textOf(dom, "updated"))
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})

	providerCells := func(t *testing.T, dom string) {
		t.Helper()
		for _, id := range named("echo-done", "echo-again") {
			row := regexp.MustCompile(`<tr class="job[^"]*" data-job="` + id + `">.*?</tr>`).FindString(dom)
			if !strings.Contains(row, `<td class="provider">`+peerCell(provider)+`</td>`) {
				t.Errorf("job %s's provider cell: %s", id, row)
			}
		}
		if !strings.Contains(dom, `<td class="name">`+domText(hostile)+`</td>`) {
			t.Error("the job named with markup does not show its name as text")
		}
	}
	networkCell := func(t *testing.T, dom string) {
		t.Helper()
		if !strings.Contains(dom, `<tr class="provider" data-peer="`+provider+`"><td>`+peerCell(provider)) {
			t.Error("the network table does not show the provider by the end of its ID, whole on hover")
		}
	}
	attemptsListed := func(t *testing.T, dom string) {
		t.Helper()
		row := regexp.MustCompile(`<tr class="attempts" data-attempts-of="` + again.ID + `">.*?</tr>`).FindString(dom)
		for _, a := range again.Attempts {
			li := regexp.MustCompile(`<li class="attempt[^"]*" data-attempt="` + a.ID + `" data-n="` + fmt.Sprint(a.N) + `">.*?</li>`).FindString(row)
			if !strings.Contains(li, `<a href="#name=`+again.Attempts[1].ID+`&amp;job=`+a.ID+`"`) || !strings.Contains(li, " on "+peerCell(provider)) {
				t.Errorf("attempt %d is not listed, linked to its log, with its provider: %q", a.N, li)
			}
		}
		if !strings.Contains(row, "run again from the start") {
			t.Errorf("the second attempt does not say it ran from the start: %s", row)
		}
		if !regexp.MustCompile(`data-job="` + again.ID + `">.*?<td class="attempts-count">2</td>`).MatchString(dom) {
			t.Error("the resumed job's row does not count its attempts")
		}
	}
	for _, tc := range []struct {
		name, hash string
		rows       []string
		page       string
		also       func(t *testing.T, dom string)
	}{
		{"newest", "", ids(newest[:50]), "page 1 of 4, 200 jobs", networkCell},
		{"last page", "#page=4", ids(newest[150:]), "page 4 of 4, 200 jobs", providerCells},
		{"name", "#name=BULK-01", bulk(10, 19), "page 1 of 1, 10 of 200 jobs", nil},
		{"state and name", "#state=queued&name=ECHO", named("echo-waits"), "page 1 of 1, 1 of 200 jobs", nil},
		{"attempt ID", "#name=" + again.Attempts[1].ID, []string{again.ID}, "page 1 of 1, 1 of 200 jobs", attemptsListed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dom := string(chromiumFor(t, ctx, exe, 3*time.Second, "--dump-dom", uiLink(t, ctx, c.Nodes[0])+tc.hash))
			check(t, dom, tc.rows, tc.page)
			// Drawn first from the snapshot, then refreshed from the API,
			// the filter and page holding.
			if !strings.Contains(dom, `data-first="snapshot"`) || !strings.HasPrefix(textOf(dom, "updated"), "updated ") {
				t.Errorf("first drawn from its snapshot, then refreshed? %q", textOf(dom, "updated"))
			}
			if tc.also != nil {
				tc.also(t, dom)
			}
			if t.Failed() {
				t.Logf("DOM:\n%s", dom)
			}
		})
	}
}

// httpGet reads url from n's API, with its token.
func httpGet(t *testing.T, url string, n *cluster.Node) []byte {
	t.Helper()
	tok, err := api.ReadToken(n.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return b
}

// A node made up for the page: its network, jobs, ledger (empty) and logs
// (one line naming the job or attempt asked for). The fakes answer what
// the page reads; the interfaces they embed, nil, the rest. (The alias
// names the embedded Jobs apart from the Jobs method.)
type (
	fakeNetwork   struct{ nodes []api.Node }
	submitterJobs = apiserver.Jobs
	fakeJobs      struct {
		submitterJobs
		jobs []api.Job
	}
	fakeLedger struct{ apiserver.Ledger }
	fakeLogs   struct{}
)

func (fakeNetwork) ID() api.ID {
	return api.ID{PeerID: "12D3KooWSelfSelfSelfSelfSelfSelfSelfSelfSe1f0000", Network: "fake"}
}
func (fakeNetwork) Peers() []api.Peer    { return nil }
func (n fakeNetwork) Nodes() []api.Node  { return n.nodes }
func (fakeNetwork) Matches() []api.Match { return nil }

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

// A job resumed twice from its checkpoints, on two providers, as the page
// shows it: one row, its attempts listed under it, each linked to its own
// log and saying which checkpoint it resumed from; a link to an attempt,
// opened, shows that attempt's log. No testnet: the node is made up.
func TestDashboardAttemptsInBrowser(t *testing.T) {
	exe := browser(t)
	p1 := "12D3KooWProviderOneProviderOneProviderOne1111aaaa"
	p2 := "12D3KooWProviderTwoProviderTwoProviderTwo2222bbbb"
	c1, c2 := "bafyreic1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1", "bafyreic2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2"
	a := []string{"bafyreia1a1a1a1a1a1a1a1a1a1a1a1", "bafyreia2a2a2a2a2a2a2a2a2a2a2a2", "bafyreia3a3a3a3a3a3a3a3a3a3a3a3"}
	now := time.Now().UTC()
	at := func(s int) *time.Time { t := now.Add(time.Duration(s-100) * time.Second); return &t }
	hostile := `"><img src=x onerror="document.title='injected'"><b>`
	jobs := []api.Job{
		{ID: a[0], Name: "train", State: api.JobRunning, Provider: p1, Submitted: *at(0),
			Steps: []api.Step{{Step: api.StepSubmit, At: *at(0)}, {Step: api.StepRent, At: *at(60)}, {Step: api.StepRun, At: *at(61)}},
			Attempts: []api.Attempt{
				{N: 1, ID: a[0], State: api.JobReleased, Outcome: "provider-lost", Attribution: "provider", Provider: p1, From: at(1), To: at(20), Checkpoint: c1},
				{N: 2, ID: a[1], State: api.JobReleased, Outcome: "provider-lost", Attribution: "provider", Provider: p2, From: at(30), To: at(50), StartedFrom: c1, Checkpoint: c2},
				{N: 3, ID: a[2], State: api.JobRunning, Provider: p1, From: at(60), StartedFrom: c2},
			}},
		{ID: "bafyreihostilejob", Name: hostile, State: api.JobQueued, Submitted: *at(10), Reason: "no offer has 4 GPUs"},
		{ID: "bafyreiarrayjob", Name: "sweep", State: api.JobRunning, Submitted: *at(20),
			Tasks: &api.TaskCounts{Total: 12, Completed: 6, Failed: 1, Running: 2, Queued: 3, FailedIndices: []int{4},
				Done: []api.DonePoint{{At: *at(30), Done: 1}, {At: *at(40), Done: 4}, {At: *at(50), Done: 6}}}},
	}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{
		Network: fakeNetwork{nodes: []api.Node{{PeerID: p1, LastSeen: now}, {PeerID: p2, LastSeen: now}}},
		Jobs:    fakeJobs{jobs: jobs}, Ledger: fakeLedger{}, Logs: fakeLogs{}, Log: slog.New(slog.DiscardHandler),
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dom := string(chromiumFor(t, ctx, exe, 3*time.Second, "--dump-dom", srv.URL+"/ui/#job="+a[1]))
	if got := jobRows(dom); !slices.Equal(got, []string{"bafyreiarrayjob", "bafyreihostilejob", a[0]}) {
		t.Errorf("rows %v, want the array, the queued job, then the resumed one, once", got)
	}
	if !regexp.MustCompile(`data-job="bafyreiarrayjob">.*?<td class="state-running">running<br><span class="taskbar"[^>]*>.*?</span><span class="tasks-ended"> 7/12 tasks ended</span>.*?<span class="failed-indices"[^>]*>failed: 4</span></td>`).MatchString(dom) {
		t.Error("the array's row does not show its tasks ended and failed")
	}
	// The plot of tasks completed: a step from 0 at submit through each point.
	fig := regexp.MustCompile(`<figure id="tasks-figure">.*?</figure>`).FindString(dom)
	path := regexp.MustCompile(`<path d="([^"]*)"[^>]*data-series="sweep \(6/12\)"`).FindStringSubmatch(fig)
	if path == nil || strings.Count(path[1], " V") != 3 {
		t.Errorf("the tasks-completed plot does not draw the array's curve: %s", fig)
	}
	if !strings.Contains(dom, `<tr class="job chosen" data-job="`+a[0]+`">`) {
		t.Error("the job whose attempt is chosen is not marked")
	}
	row := regexp.MustCompile(`<tr class="attempts" data-attempts-of="` + a[0] + `">.*?</tr>`).FindString(dom)
	for i, tc := range []struct {
		class, provider, from string
	}{
		{"attempt", p1, ""},
		{"attempt chosen", p2, c1},
		{"attempt", p1, c2},
	} {
		li := regexp.MustCompile(`<li class="` + tc.class + `" data-attempt="` + a[i] + `" data-n="` + fmt.Sprint(i+1) + `">.*?</li>`).FindString(row)
		switch {
		case li == "":
			t.Errorf("attempt %d is not listed (class %q): %s", i+1, tc.class, row)
		case !strings.Contains(li, `<a href="#job=`+a[i]+`"`):
			t.Errorf("attempt %d is not linked to its log: %s", i+1, li)
		case !strings.Contains(li, " on "+peerCell(tc.provider)):
			t.Errorf("attempt %d does not name its provider by the end of its ID: %s", i+1, li)
		case tc.from == "" && strings.Contains(li, "resumed"):
			t.Errorf("attempt %d says it resumed: %s", i+1, li)
		case tc.from != "" && !strings.Contains(li, `resumed from checkpoint <code title="`+tc.from+`">`+tc.from[:12]+`</code>`):
			t.Errorf("attempt %d does not say it resumed from %s: %s", i+1, tc.from, li)
		}
	}
	if !regexp.MustCompile(`data-n="1">[^<]*<a [^>]*><code>[^<]*</code></a> on <span[^>]*>[^<]*</span>, \d\d:\d\d:\d\d–\d\d:\d\d:\d\d, provider-lost`).MatchString(row) ||
		!regexp.MustCompile(`data-n="3">.*?, since \d\d:\d\d:\d\d, running`).MatchString(row) {
		t.Errorf("the attempts do not say when they held their providers: %s", row)
	}
	if !strings.Contains(row, "provider-lost (provider)") {
		t.Errorf("the lost attempts do not say how they ended: %s", row)
	}
	if got := textOf(dom, "log"); got != "log of "+a[1]+"\n" {
		t.Errorf("the log shown is %q, want the chosen attempt's", got)
	}
	for _, p := range []string{p1, p2} {
		if !strings.Contains(dom, `data-peer="`+p+`"><td>`+peerCell(p)) {
			t.Errorf("the network table does not show %s by the end of its ID", p)
		}
	}
	if strings.Contains(dom, "<img") || !strings.Contains(dom, `<td class="name">`+domText(hostile)+`</td>`) {
		t.Error("a job's name was read as markup")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}
