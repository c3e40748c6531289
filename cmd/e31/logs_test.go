package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

// logs -f of a job not yet running says what it waits for, then follows.
func TestLogsFollowSaysWhatAQueuedJobWaitsFor(t *testing.T) {
	for _, state := range []api.JobState{api.JobQueued, api.JobRunning} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/logs") {
				_, _ = w.Write([]byte("step 1\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(api.Job{ID: "job1", State: state, Reason: "no offer has 1 free GPU"})
		}))
		var out, errOut strings.Builder
		g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
		err := runLogs(context.Background(), logsOptions{follow: true}, g, "job1")
		srv.Close()
		if err != nil || out.String() != "step 1\n" {
			t.Fatalf("%s: %v, printed %q", state, err, out.String())
		}
		said := strings.Contains(errOut.String(), "job job1 is queued: no offer has 1 free GPU; its log follows once it runs")
		if said != (state == api.JobQueued) {
			t.Errorf("%s: stderr %q", state, errOut.String())
		}
	}
}
