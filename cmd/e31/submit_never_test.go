package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/e31network/e31/node/api"
)

// neverDaemon accepts every submit as job "job1" and lists one provider
// of two H100s, 16 CPUs and 64 GiB; it counts the reads of the job, which
// following it would make.
type neverDaemon struct{ jobReads atomic.Int32 }

func (f *neverDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	job := api.Job{ID: "job1", State: api.JobQueued, Steps: []api.Step{{Step: api.StepSubmit}}}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
		_ = json.NewEncoder(w).Encode(api.SubmitEvent{Job: &job})
	case r.URL.Path == "/v1/nodes":
		gpu := api.GPU{Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, Free: true}
		_ = json.NewEncoder(w).Encode([]api.Node{{PeerID: "12D3KooWprovider", GPUs: []api.GPU{gpu, gpu}, CPUs: 16, MemoryBytes: 64 << 30}})
	case r.URL.Path == "/v1/jobs/job1":
		f.jobReads.Add(1)
		_ = json.NewEncoder(w).Encode(job)
	default:
		http.NotFound(w, r)
	}
}

// A job that no offer in view could ever hold is accepted with a warning
// naming why; submit --wait ends at once with that reason and exit status
// 7 instead, not following a job that would wait forever. A job that fits
// gets no warning.
func TestSubmitNeverHeld(t *testing.T) {
	f := &neverDaemon{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	t.Setenv("E31_API_TOKEN", "token")
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name string
		args []string
		why  string
	}{
		{"model", []string{"--gpu-model", "H200"}, "no offer in view has gpu_model H200 (offered: NVIDIA H100 80GB HBM3)"},
		{"count", []string{"--gpus", "4"}, "no offer in view could ever hold 4 GPUs: the most any has is 2"},
		{"memory", []string{"--memory", "128GiB"}, "no offer in view could ever hold 128GiB of memory: the most any has is 64GiB"},
		{"fits", []string{"--gpus", "2", "--gpu-model", "H100"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"--api", addr, "submit", "--limit", "1m"}, tc.args...), "--", "true")
			stdout, stderr, err := e31(t, args...)
			if err != nil || strings.TrimSpace(stdout) != "job1" {
				t.Fatalf("submit: %v, %q", err, stdout)
			}
			warned := strings.Contains(stderr, "warning: "+tc.why+"; job job1 is accepted and waits")
			if tc.why != "" && !warned {
				t.Errorf("stderr %q, want the warning %q", stderr, tc.why)
			}
			if tc.why == "" && strings.Contains(stderr, "warning") {
				t.Errorf("a job that fits was warned about: %q", stderr)
			}
			if tc.why == "" {
				return
			}
			reads := f.jobReads.Load()
			_, _, err = e31(t, append(args[:len(args)-2:len(args)-2], "--wait", "--", "true")...)
			var we *waitError
			if !errors.As(err, &we) || we.ExitCode() != waitNeverHeld || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("submit --wait: %v, want exit %d with %q", err, waitNeverHeld, tc.why)
			}
			if f.jobReads.Load() != reads {
				t.Error("submit --wait followed a job no offer could ever hold")
			}
		})
	}
}
