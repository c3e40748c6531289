package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// arrayDaemon answers for an array arr of three tasks as a daemon would:
// task 0 completed, task 1 withdrawn on purpose, task 2 as ends says
// ("completed", "failed", or "failed with output": failed, its output and
// logs there to write); gets records the folders written.
func arrayDaemon(t *testing.T, ends string, gets *[]string) *httptest.Server {
	t.Helper()
	tasks := map[string]api.Job{
		"arr.0": {ID: "arr.0", State: api.JobReleased, Outcome: "completed", Output: "bafy0"},
		"arr.1": {ID: "arr.1", State: api.JobWithdrawn, Outcome: "withdrawn", Attribution: "submitter"},
		"arr.2": {ID: "arr.2", State: api.JobReleased, Outcome: strings.TrimSuffix(ends, " with output"), Output: map[bool]string{true: "bafy2"}[ends != "failed"]},
	}
	outcome := map[bool]string{true: "withdrawn", false: "failed"}[ends == "completed"]
	arr := api.Job{ID: "arr", State: api.JobReleased, Outcome: outcome, Tasks: &api.TaskCounts{ID: "arr", Total: 3, Completed: 1, Withdrawn: 1}}
	if ends == "completed" {
		arr.Tasks.Completed++
	} else {
		arr.Tasks.Failed, arr.Tasks.FailedIndices = 1, []int{2}
	}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "/get")
		switch {
		case r.URL.Path == "/v1/receipts":
			_ = json.NewEncoder(w).Encode(api.Receipts{})
		case id == "arr":
			_ = json.NewEncoder(w).Encode(arr)
		case r.Method == http.MethodPost && tasks[id].Output != "":
			var req api.GetRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			mu.Lock()
			*gets = append(*gets, req.Dir)
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(api.GetResult{CID: tasks[id].Output, Dir: req.Dir, Bytes: 3})
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "job " + id + " has no output (it is " + string(tasks[id].State) + ")"})
		case tasks[id].ID != "":
			_ = json.NewEncoder(w).Encode(tasks[id])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestGetArraySkipsWithdrawnTasks: e31 get ARRAY skips a task withdrawn
// on purpose with a note naming it and why, and exits 0; a failed task is
// still an error that names it, and not the withdrawn one, even where
// what it returned is written.
func TestGetArraySkipsWithdrawnTasks(t *testing.T) {
	for _, ends := range []string{"completed", "failed", "failed with output"} {
		var gets []string
		srv := arrayDaemon(t, ends, &gets)
		var out, errOut bytes.Buffer
		g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
		dir := t.TempDir()
		err := runGet(context.Background(), getOptions{dir: dir}, g, "arr")
		if !strings.Contains(errOut.String(), "skipped 1 tasks withdrawn on purpose: 1 (withdrawn, attributed to submitter)") {
			t.Errorf("%s: stderr %q names no withdrawn task", ends, errOut.String())
		}
		switch ends {
		case "completed":
			if err != nil || !strings.Contains(out.String(), "wrote 2 of 3 tasks") || !strings.Contains(out.String(), "1 withdrawn, skipped") {
				t.Errorf("completed but one withdrawn: %v, stdout %q", err, out.String())
			}
		case "failed":
			if err == nil || !strings.Contains(err.Error(), "1 tasks not written: 2 (") || strings.Contains(err.Error(), "1 (") {
				t.Errorf("one failed, one withdrawn: %v", err)
			}
		case "failed with output":
			if err == nil || !strings.Contains(err.Error(), "tasks 2 failed") || strings.Contains(err.Error(), "not written") || !strings.Contains(out.String(), "wrote 2 of 3 tasks") {
				t.Errorf("one failed with its output, one withdrawn: %v, stdout %q", err, out.String())
			}
		}
	}
}

// TestSubmitWaitWritesAnArraysOutputs: submit --wait -o DIR of an array
// writes each task's output at DIR/<index>, as e31 get does, and says so;
// the array's ending is still the error when a task failed.
func TestSubmitWaitWritesAnArraysOutputs(t *testing.T) {
	for _, ends := range []string{"completed", "failed"} {
		var gets []string
		srv := arrayDaemon(t, ends, &gets)
		var out, errOut bytes.Buffer
		g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
		dir := t.TempDir()
		err := followAndGet(context.Background(), g, "arr", followOptions{outDir: dir})
		slices.Sort(gets)
		want := []string{filepath.Join(dir, "0")}
		if ends == "completed" {
			want = append(want, filepath.Join(dir, "2"))
		}
		if !slices.Equal(gets, want) || !strings.Contains(errOut.String(), "to "+dir+"/<index>") {
			t.Errorf("%s: wrote %v, want %v; stderr %q", ends, gets, want, errOut.String())
		}
		if ends == "failed" && (err == nil || !strings.Contains(err.Error(), "ended failed")) {
			t.Errorf("%s: %v", ends, err)
		}
	}
}
