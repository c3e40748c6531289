package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/e31network/e31/node/api"
)

// outage is a daemon that goes away for a while: requests from the from-th
// on, down of them, find their connection closed unanswered, as a
// stopping daemon's do; the others reach h.
type outage struct {
	h        http.Handler
	from     int
	down     int
	mu       sync.Mutex
	requests int
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.requests++
	n := o.requests
	o.mu.Unlock()
	if n >= o.from && n < o.from+o.down {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	o.h.ServeHTTP(w, r)
}

// e31 wait outlasts a restart of its daemon: it says the daemon is away,
// then back, and ends as the jobs did; with --retry-for 0 it gives up at
// once, with the exit status of no daemon.
func TestWaitOutlastsARestart(t *testing.T) {
	fake := func() *fakeJobs {
		f := &fakeJobs{scripts: map[string][]api.Job{}}
		f.jobs = []api.Job{job("a", "a", api.JobQueued, "", "")}
		f.scripts["a"] = []api.Job{job("a", "a", api.JobQueued, "", ""), job("a", "a", api.JobRunning, "", ""), job("a", "a", api.JobReleased, "completed", "job")}
		return f
	}
	// The first request resolves the job; the second and third, lists, find
	// no daemon.
	out, err := runCLI(t, &outage{h: fake(), from: 2, down: 2}, "wait", "--poll", "1ms", "a")
	if err != nil {
		t.Fatalf("wait across a restart: %v\n%s", err, out)
	}
	for _, want := range []string{"does not answer (restarting?); asking again for up to 2m0s", "answers again after", "a  a  completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "does not answer") != 1 {
		t.Errorf("the daemon's absence said more than once:\n%s", out)
	}

	out, err = runCLI(t, &outage{h: fake(), from: 2, down: 2}, "wait", "--poll", "1ms", "--retry-for", "0", "a")
	if !errors.Is(err, api.ErrNoDaemon) || strings.Contains(out, "asking again") {
		t.Fatalf("wait --retry-for 0: %v\n%s", err, out)
	}
	// A job the daemon does not know is said at once, not asked again.
	out, err = runCLI(t, fake(), "wait", "--poll", "1ms", "nosuch")
	if err == nil || errors.Is(err, api.ErrNoDaemon) || strings.Contains(out, "asking again") {
		t.Fatalf("wait for an unknown job: %v\n%s", err, out)
	}
}

// logs -f goes on across a restart of its daemon where the log was: the
// log sent again from its beginning is not printed twice.
func TestLogsFollowOutlastsARestart(t *testing.T) {
	var mu sync.Mutex
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/logs") {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(api.Job{ID: "job1", State: api.JobRunning})
			return
		}
		mu.Lock()
		sent++
		n := sent
		mu.Unlock()
		w.Header().Set("Trailer", api.LogErrorTrailer+", "+api.LogStopTrailer)
		_, _ = w.Write([]byte("line 1\nline 2\n"))
		w.(http.Flusher).Flush()
		switch n {
		case 1: // the daemon stops while the job runs
			w.Header().Set(api.LogErrorTrailer, "the daemon is stopping")
			w.Header().Set(api.LogStopTrailer, "1")
		case 2: // the next one is killed mid-log
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			_, _ = w.Write([]byte("line 3\n"))
		}
	}))
	defer srv.Close()
	var out, errOut strings.Builder
	g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
	err := runLogs(context.Background(), logsOptions{follow: true, retryFor: api.DefaultReconnectFor}, g, "job1")
	if err != nil || out.String() != "line 1\nline 2\nline 3\n" {
		t.Fatalf("%v, printed %q; stderr %q", err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "does not answer") || !strings.Contains(errOut.String(), "answers again") || strings.Contains(errOut.String(), "otherwise") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

// A log sent again that begins otherwise than the one printed (its
// provider kept only its tail) is said once, and goes on from the same
// count of bytes.
func TestLogResumeSaysWhereTheLogDiffers(t *testing.T) {
	var out strings.Builder
	mismatches := 0
	l := newLogResume(&out, nil, func() { mismatches++ })
	_, _ = l.Write([]byte("aaaa\nbb"))
	l.restart()
	_, _ = l.Write([]byte("aaa"))
	_, _ = l.Write([]byte("a\nbbb\n"))
	if out.String() != "aaaa\nbbb\n" || mismatches != 0 {
		t.Fatalf("the same log again: printed %q, %d mismatches", out.String(), mismatches)
	}
	l.restart()
	_, _ = l.Write([]byte("[lost]\nxxccc\n"))
	if out.String() != "aaaa\nbbb\nccc\n" || mismatches != 1 {
		t.Fatalf("a log that begins otherwise: printed %q, %d mismatches", out.String(), mismatches)
	}
}
