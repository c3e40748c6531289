package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

// TestGetNamesWhatTheOutputLeftOut: a user who finds a link or a FIFO
// missing from the folder `e31 get` wrote learns there why, on stderr, and
// a checkpoint, which carries no such list, prints none.
func TestGetNamesWhatTheOutputLeftOut(t *testing.T) {
	skipped := []string{`out/abs: is a symlink to "/etc/passwd", outside the tree`, "out/fifo: is not a regular file, directory or symlink (p---------)"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/get"):
			var req api.GetRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			_ = json.NewEncoder(w).Encode(api.GetResult{CID: "bafyout", Dir: req.Dir, Bytes: 6})
		case r.URL.Path == "/v1/jobs/job1":
			_ = json.NewEncoder(w).Encode(api.Job{ID: "job1", State: api.JobReleased, Outcome: "completed", Output: "bafyout", Skipped: skipped})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, checkpoint := range []bool{false, true} {
		var out, errOut bytes.Buffer
		g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
		if err := runGet(context.Background(), getOptions{dir: t.TempDir(), checkpoint: checkpoint}, g, "job1"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "wrote bafyout") {
			t.Errorf("checkpoint %v: stdout %q", checkpoint, out.String())
		}
		for _, s := range skipped {
			if got := strings.Contains(errOut.String(), "left out of output: "+s); got == checkpoint {
				t.Errorf("checkpoint %v: stderr %q names %q: %v", checkpoint, errOut.String(), s, got)
			}
		}
	}
}
