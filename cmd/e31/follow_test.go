package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
)

// fakeJobDaemon serves one job through running to released, a version
// each, and the receipts route followJob reads at the end. With waits set
// it answers a wait with the next version at once, as a daemon does at the
// job's next change; without, it ignores wait and version (a daemon that
// predates them), and moves the job on every third request.
type fakeJobDaemon struct {
	waits   bool
	mu      sync.Mutex
	asked   []time.Time // when each GET of the job came
	sawWait bool
}

func (f *fakeJobDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/receipts" {
		_ = json.NewEncoder(w).Encode(api.Receipts{Receipts: json.RawMessage("[]")})
		return
	}
	f.mu.Lock()
	f.asked = append(f.asked, time.Now())
	n := len(f.asked)
	f.sawWait = f.sawWait || r.URL.Query().Has("wait")
	f.mu.Unlock()
	step := n - 1 // the first request reads the job, each wait moves it on
	if !f.waits {
		step = (n - 1) / 3
	}
	j := api.Job{ID: "job1", State: api.JobRunning, Steps: []api.Step{{Step: api.StepSubmit}}}
	if f.waits {
		j.Version = uint64(1 + step)
	}
	if step >= 2 {
		j.State, j.Outcome = api.JobReleased, "completed"
	}
	_ = json.NewEncoder(w).Encode(j)
}

// followJob hears of each change from a daemon that answers on change,
// never sleeping its poll interval; with a daemon that cannot, it asks no
// more often than the poll interval.
func TestFollowJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(f *fakeJobDaemon, poll time.Duration) {
		t.Helper()
		srv := httptest.NewServer(f)
		defer srv.Close()
		var out bytes.Buffer
		g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &out}
		if err := followJob(ctx, g, "job1", followOptions{poll: poll}); err != nil {
			t.Fatalf("followJob: %v\n%s", err, out.String())
		}
	}

	// A poll interval of an hour: the test ends only if it is never slept.
	waits := &fakeJobDaemon{waits: true}
	run(waits, time.Hour)
	if len(waits.asked) != 3 || !waits.sawWait {
		t.Fatalf("asked %d times (wait sent: %v), want a read and two waits", len(waits.asked), waits.sawWait)
	}

	const poll = 20 * time.Millisecond
	old := &fakeJobDaemon{}
	run(old, poll)
	if len(old.asked) != 7 {
		t.Fatalf("asked an old daemon %d times, want 7", len(old.asked))
	}
	// The first wait follows the first read at once; each answer with
	// nothing new is followed by the poll interval.
	for i := 2; i < len(old.asked); i++ {
		if gap := old.asked[i].Sub(old.asked[i-1]); gap < poll {
			t.Fatalf("request %d came %s after the one before, sooner than the poll interval %s", i, gap, poll)
		}
	}
}

// A job that did not complete shows the end of its stderr.log.
func TestPrintTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stderr.log")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printTail(&b, p, 3)
	if want := "last lines of " + p + ":\n  | line 27\n  | line 28\n  | line 29\n"; b.String() != want {
		t.Errorf("tail:\n%s\nwant:\n%s", b.String(), want)
	}
	for _, empty := range []string{"", "\n"} {
		if err := os.WriteFile(p, []byte(empty), 0o644); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		printTail(&b, p, 3)
		if b.Len() != 0 {
			t.Errorf("empty log %q printed %q", empty, b.String())
		}
	}
	b.Reset()
	printTail(&b, filepath.Join(dir, "absent"), 3)
	if b.Len() != 0 {
		t.Errorf("absent log printed %q", b.String())
	}
	// A huge last line is cut to the bytes read, not read whole.
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	printTail(&b, p, 3)
	if b.Len() > 9<<10 || !strings.Contains(b.String(), "xxx") {
		t.Errorf("a 1 MiB line printed %d bytes", b.Len())
	}
}

// TestFollowInterruptedSaysTheJobGoesOn: a user who stops `submit --wait`
// (Ctrl-C) learns that the job runs on, and how to follow or stop it.
func TestFollowInterruptedSaysTheJobGoesOn(t *testing.T) {
	// An old daemon (no waits) never moves the job within the deadline.
	srv := httptest.NewServer(&fakeJobDaemon{})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &out}
	errc := make(chan error, 1)
	go func() { errc <- followJob(ctx, g, "job1", followOptions{poll: time.Hour}) }()
	cancel()
	err := <-errc
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("followJob after cancel: %v", err)
	}
	for _, want := range []string{"stopped following job job1", "e31 status job1", "e31 withdraw job1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
