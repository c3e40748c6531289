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
	"time"

	"github.com/e31network/e31/node/api"
)

// fakeJobs is a daemon's job list: each GET of /v1/jobs moves every job
// one step along its script of states, so that jobs end at different
// times; withdraw ends a job at once.
type fakeJobs struct {
	mu        sync.Mutex
	jobs      []api.Job
	scripts   map[string][]api.Job // the states each job goes through, last one kept
	listed    int
	withdrawn []string
}

func (f *fakeJobs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/jobs":
		f.listed++
		for i := range f.jobs {
			if s := f.scripts[f.jobs[i].ID]; len(s) > 0 {
				f.jobs[i] = s[min(f.listed-1, len(s)-1)]
			}
		}
		_ = json.NewEncoder(w).Encode(f.jobs)
	case strings.HasSuffix(r.URL.Path, "/withdraw"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "/withdraw")
		for i := range f.jobs {
			if f.jobs[i].ID == id {
				f.withdrawn = append(f.withdrawn, id)
				f.jobs[i].State = api.JobWithdrawn
				delete(f.scripts, id)
				_ = json.NewEncoder(w).Encode(f.jobs[i])
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no such job " + id})
	default:
		id := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
		for _, j := range f.jobs {
			if j.ID == id {
				_ = json.NewEncoder(w).Encode(j)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no such job " + id})
	}
}

func job(id, name string, st api.JobState, outcome, attribution string) api.Job {
	return api.Job{ID: id, Name: name, State: st, Outcome: outcome, Attribution: attribution, Submitted: time.Now()}
}

func runCLI(t *testing.T, f http.Handler, args ...string) (string, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	defer srv.Close()
	var out strings.Builder
	g := &globalOptions{stdout: &out, stderr: &out}
	root := newRootCommand(g)
	root.SetArgs(append([]string{"--api", strings.TrimPrefix(srv.URL, "http://")}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func exitOf(err error) int {
	var c exitCoder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// e31 wait returns once every job has ended, with the worst ending's exit
// status; --any returns at the first ending.
func TestWait(t *testing.T) {
	script := func(id string, end api.Job) []api.Job {
		return []api.Job{job(id, id, api.JobQueued, "", ""), job(id, id, api.JobRunning, "", ""), end}
	}
	newFake := func() *fakeJobs {
		f := &fakeJobs{scripts: map[string][]api.Job{}}
		for _, j := range []api.Job{
			job("a", "a", api.JobReleased, "completed", "job"),
			job("b", "b", api.JobReleased, "failed", "job"),
			job("c", "c", api.JobReleased, "provider-lost", "provider"),
		} {
			f.jobs = append(f.jobs, job(j.ID, j.Name, api.JobQueued, "", ""))
			f.scripts[j.ID] = script(j.ID, j)
		}
		f.scripts["a"] = f.scripts["a"][1:] // a ends a step before the others
		return f
	}
	for _, c := range []struct {
		args []string
		exit int
	}{
		{[]string{"wait", "--poll", "1ms", "a"}, waitCompleted},
		{[]string{"wait", "--poll", "1ms", "a", "b"}, waitJobFailed},
		{[]string{"wait", "--poll", "1ms", "a", "b", "c"}, waitNotJob},
		{[]string{"wait", "--poll", "1ms", "--any", "c", "a"}, waitCompleted},
	} {
		out, err := runCLI(t, newFake(), c.args...)
		if got := exitOf(err); got != c.exit {
			t.Errorf("e31 %s: exit %d (%v), want %d\n%s", strings.Join(c.args, " "), got, err, c.exit, out)
		}
	}
	out, err := runCLI(t, newFake(), "wait", "--poll", "1ms", "a", "b", "c")
	for _, want := range []string{"a  a  completed", "b  b  failed (attributed to job)", "c  c  provider-lost (attributed to provider)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "job c ended provider-lost") {
		t.Errorf("error %v, want it to name the worst ending, c's", err)
	}
	if _, err := runCLI(t, newFake(), "wait", "nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("waiting for an unknown job: %v, want an error naming it", err)
	}
	stuck := &fakeJobs{jobs: []api.Job{job("q", "q", api.JobQueued, "", "")}}
	if _, err := runCLI(t, stuck, "wait", "--poll", "1ms", "--timeout", "50ms", "q"); exitOf(err) != waitTimedOut {
		t.Errorf("a job that never ends under --timeout: %v (exit %d), want exit %d", err, exitOf(err), waitTimedOut)
	}
}

// e31 list selects by state and name; e31 withdraw takes back named jobs,
// or the unended jobs of a selection, and refuses mixing the two.
func TestListAndWithdrawSelect(t *testing.T) {
	newFake := func() *fakeJobs {
		return &fakeJobs{jobs: []api.Job{
			job("s1", "sweep-1", api.JobQueued, "", ""),
			job("s2", "sweep-2", api.JobRunning, "", ""),
			job("s3", "sweep-3", api.JobReleased, "completed", "job"),
			job("t1", "train.py", api.JobQueued, "", ""),
		}}
	}
	out, err := runCLI(t, newFake(), "list", "--name", "sweep-*", "--state", "queued,released")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "s1") || !strings.Contains(out, "s3") || strings.Contains(out, "s2") || strings.Contains(out, "t1") {
		t.Errorf("list --name sweep-* --state queued,released:\n%s", out)
	}
	labelled := newFake()
	labelled.jobs[1].Labels = map[string]string{"sweep": "lr", "team": "vision"}
	labelled.jobs[3].Labels = map[string]string{"team": "vision"}
	out, err = runCLI(t, labelled, "list", "--label", "team=vision", "--label", "sweep=lr")
	if err != nil || !strings.Contains(out, "s2") || strings.Contains(out, "t1") || strings.Contains(out, "s1") {
		t.Errorf("list --label team=vision --label sweep=lr (%v):\n%s", err, out)
	}
	if _, err := runCLI(t, labelled, "list", "--label", "team"); err == nil || !strings.Contains(err.Error(), "KEY=VALUE") {
		t.Errorf("list --label team: %v, want an error asking for KEY=VALUE", err)
	}
	if _, err := runCLI(t, labelled, "withdraw", "--label", "team=vision"); err != nil || strings.Join(labelled.withdrawn, " ") != "s2 t1" {
		t.Errorf("withdraw --label team=vision: %v, took back %v, want s2 t1", err, labelled.withdrawn)
	}
	if _, err := runCLI(t, newFake(), "list", "--state", "done"); err == nil || !strings.Contains(err.Error(), `"done"`) {
		t.Errorf("list --state done: %v, want an error naming the state", err)
	}

	f := newFake()
	if _, err := runCLI(t, f, "withdraw", "--name", "sweep-*"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.withdrawn, " ") != "s1 s2" {
		t.Errorf("withdraw --name sweep-* took back %v, want s1 s2 (s3 has ended)", f.withdrawn)
	}
	f = newFake()
	if out, err := runCLI(t, f, "withdraw", "t1", "nosuch", "s1"); err == nil || strings.Join(f.withdrawn, " ") != "t1 s1" || !strings.Contains(out, "nosuch") {
		t.Errorf("withdraw t1 nosuch s1: %v, withdrew %v, want t1 and s1 withdrawn and nosuch named\n%s", err, f.withdrawn, out)
	}
	if _, err := runCLI(t, newFake(), "withdraw", "t1", "--name", "x"); err == nil {
		t.Error("withdraw of named jobs and a selection at once was not refused")
	}
	if _, err := runCLI(t, newFake(), "withdraw", "--name", "nothing-*"); err == nil {
		t.Error("withdraw of a selection that matches nothing did not fail")
	}
}

// A job's run time is its run step's length: to the next step once there
// is one, to now while it runs, none before it starts.
func TestRunTime(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	j := api.Job{State: api.JobReleased, GPUs: []string{"a", "b"}, Steps: []api.Step{
		{Step: api.StepSubmit, At: at}, {Step: api.StepRent, At: at.Add(time.Second)},
		{Step: api.StepRun, At: at.Add(2 * time.Second)}, {Step: api.StepOutput, At: at.Add(92 * time.Second)},
	}}
	if d, ok := runTime(j); !ok || d != 90*time.Second {
		t.Fatalf("run time %s %t, want 1m30s", d, ok)
	}
	if got := summary(api.Job{ID: "x", State: api.JobReleased, Outcome: "completed", GPUs: j.GPUs, Steps: j.Steps, Output: "bafy"}); got != "completed, ran 1m30s, 0.050 GPU-h, output bafy" {
		t.Fatalf("summary %q", got)
	}
	j.Steps = j.Steps[:2]
	if _, ok := runTime(j); ok {
		t.Fatal("a job that never ran has a run time")
	}
}
