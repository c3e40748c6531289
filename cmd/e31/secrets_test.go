package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// submits is a daemon that keeps every submit request and answers each
// with a queued job.
type submits struct {
	mu  sync.Mutex
	got []api.SubmitRequest
}

func (s *submits) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/jobs" {
		http.NotFound(w, r)
		return
	}
	var req api.SubmitRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, req)
	n := len(s.got)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	_ = json.NewEncoder(w).Encode(api.SubmitEvent{Job: &api.Job{ID: "j" + string(rune('0'+n)), State: api.JobQueued}})
}

func (s *submits) requests() []api.SubmitRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.SubmitRequest(nil), s.got...)
}

// declared decodes the declaration a submit request carries.
func declared(t *testing.T, req api.SubmitRequest) market.Declaration {
	t.Helper()
	d, err := market.DecodeDeclaration(req.Declaration)
	if err != nil {
		t.Fatalf("the declaration sent: %v\n%s", err, req.Declaration)
	}
	return d
}

// TestSubmitSecretFlags: --secret reads each value here, from the caller's
// variable or a file, and sends it apart from the declaration, which
// names the secrets alone; a value missing here is an error naming the
// secret, and nothing reaches the daemon.
func TestSubmitSecretFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	const token, other, creds = "hf_QmVxN3ZxLzJ4cXo5dGhpcw", "wandb-value-0123", "{\"aws\": \"creds\"}\n"
	t.Setenv("HF_TOKEN", token)
	t.Setenv("WB_KEY", other)
	if err := os.WriteFile("creds.json", []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon := &submits{}
	out, err := runCLI(t, daemon, "submit", "--secret", "HF_TOKEN", "--secret", "WANDB_API_KEY=env:WB_KEY", "--secret", "CREDS=file:./creds.json",
		"--gpus", "1", "--limit", "1h", "--", "sh", "-c", "true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := daemon.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d submits", len(reqs))
	}
	req := reqs[0]
	if string(req.Secrets["HF_TOKEN"]) != token || string(req.Secrets["WANDB_API_KEY"]) != other || string(req.Secrets["CREDS"]) != creds || len(req.Secrets) != 3 {
		t.Fatalf("the values sent: %q", req.Secrets)
	}
	d := declared(t, req)
	if got := strings.Join(market.SecretNames(d.Secrets), " "); got != "HF_TOKEN WANDB_API_KEY CREDS" {
		t.Fatalf("the secrets declared: %s", got)
	}
	for _, s := range d.Secrets {
		if s.From != "" {
			t.Errorf("the declaration sent says where %s was read: %q", s.Name, s.From)
		}
	}
	for _, v := range []string{token, other, "aws"} {
		if strings.Contains(string(req.Declaration), v) || strings.Contains(out, v) {
			t.Errorf("the value %q is in the declaration or the output:\n%s\n%s", v, req.Declaration, out)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--secret", "NOT_SET_ANYWHERE"}, "secret NOT_SET_ANYWHERE: the variable NOT_SET_ANYWHERE is not set"},
		{[]string{"--secret", "T=file:./missing"}, "secret T:"},
		{[]string{"--secret", "T=vault:x"}, "must be env, env:NAME or file:PATH"},
		{[]string{"--secret", "HF_TOKEN", "--secret", "HF_TOKEN=env:WB_KEY"}, "HF_TOKEN is given twice"},
		{[]string{"--secret", "SEED", "--env", "SEED=1"}, "SEED is in work.env too"},
	} {
		t.Setenv("SEED", "1")
		args := append([]string{"submit"}, c.args...)
		args = append(args, "--gpus", "1", "--limit", "1h", "--", "true")
		if _, err := runCLI(t, daemon, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if n := len(daemon.requests()); n != 1 {
		t.Fatalf("%d submits reached the daemon; the refused ones must not", n)
	}
}

// A declaration file's secrets are read as the file says, a relative path
// from the file's folder; --secret adds to them, or says where to read one.
func TestSubmitSecretsOfAFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("file-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "job.yaml")
	decl := "name: t\nwork: {command: [\"true\"]}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\nsecrets: [{name: T, from: \"file:token\"}, {name: U}]\n"
	if err := os.WriteFile(job, []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("U", "from-env")
	t.Setenv("OTHER_U", "from-flag")
	daemon := &submits{}
	if out, err := runCLI(t, daemon, "submit", job); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := runCLI(t, daemon, "submit", job, "--secret", "U=env:OTHER_U", "--secret", "V=env:U"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := daemon.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d submits", len(reqs))
	}
	if s := reqs[0].Secrets; string(s["T"]) != "file-token" || string(s["U"]) != "from-env" || len(s) != 2 {
		t.Errorf("the file's secrets: %q", s)
	}
	if s := reqs[1].Secrets; string(s["T"]) != "file-token" || string(s["U"]) != "from-flag" || string(s["V"]) != "from-env" || len(s) != 3 {
		t.Errorf("the file's secrets with flags: %q", s)
	}
}

// Every job of a pipeline file gets its own secrets and the --secret ones.
func TestSubmitSecretsOfAPipeline(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("A", "a-value")
	t.Setenv("B", "b-value")
	p := `name: p
jobs:
  - {name: first, work: {command: ["true"]}, request: {gpus: 0, limit: 1h}, output: {path: /out}, secrets: [A]}
  - {name: second, after: [first], work: {command: ["true"]}, request: {gpus: 0, limit: 1h}, output: {path: /out}}
`
	if err := os.WriteFile("p.yaml", []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon := &submits{}
	if out, err := runCLI(t, daemon, "submit", "p.yaml", "--secret", "B"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := daemon.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d submits", len(reqs))
	}
	if s := reqs[0].Secrets; string(s["A"]) != "a-value" || string(s["B"]) != "b-value" || len(s) != 2 {
		t.Errorf("first: %q", s)
	}
	if s := reqs[1].Secrets; string(s["B"]) != "b-value" || len(s) != 1 {
		t.Errorf("second: %q", s)
	}
}

// --env with a value that looks like a token warns, pointing to --secret,
// and the job is still submitted; e31 resume --secret gives the values
// again.
func TestEnvTokenWarnsAndResumeSecrets(t *testing.T) {
	t.Chdir(t.TempDir())
	daemon := &submits{}
	out, err := runCLI(t, daemon, "submit", "--env", "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt", "--gpus", "1", "--limit", "1h", "--", "true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "e31: warning: work.env HF_TOKEN looks like a credential") || !strings.Contains(out, "--secret HF_TOKEN") || strings.Contains(out, "hf_AbCd") {
		t.Errorf("the warning:\n%s", out)
	}
	if n := len(daemon.requests()); n != 1 {
		t.Fatalf("%d submits, want the job submitted all the same", n)
	}

	t.Setenv("HF_TOKEN", "hf_again")
	if out, err := runCLI(t, daemon, "resume", "j1", "--secret", "HF_TOKEN"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reqs := daemon.requests()
	if r := reqs[len(reqs)-1]; r.ResumeOf != "j1" || string(r.Secrets["HF_TOKEN"]) != "hf_again" {
		t.Fatalf("the resume request: %s, %q", r.ResumeOf, r.Secrets)
	}
}
