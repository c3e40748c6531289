package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

func TestUnstagedPaths(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"train.py", "run.sh", "data/train.csv"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	decl := func(image string, data []market.Input, cmd ...string) market.Declaration {
		d := market.NewDeclaration("t", cmd, 1, 0, data)
		d.Work.Image = image
		d.Output.Path = "/out"
		return d
	}
	in := func(d market.Declaration, workdir string) market.Declaration {
		d.Work.Workdir = workdir
		return d
	}
	dataIn := []market.Input{{Source: filepath.Join(dir, "data"), Mount: "/data"}}
	codeIn := []market.Input{{Source: dir, Mount: "/code"}}
	for _, tc := range []struct {
		name string
		d    market.Declaration
		want []string // a substring of each note, in order
	}{
		{"script here, not staged", decl("", nil, "python3", "train.py", "--epochs", "3"), []string{`"train.py" is a file here`, "--input ./train.py:/code/train.py"}},
		{"program by relative path", decl("", nil, "./run.sh"), []string{`"./run.sh" is a file here`, "--input ./run.sh:/code/run.sh"}},
		{"a folder inside an input", decl("", dataIn, "python3", "/code/t.py", "data/train.csv"), []string{"the job sees at /data/train.csv"}},
		{"absolute paths and flags", decl("", nil, "python3", "/code/train.py", "--data", "/data", "-v"), nil},
		{"names nothing here", decl("", nil, "sh", "-c", "echo hi > x", "other.py"), nil},
		{"program on the PATH", decl("", nil, "train.py"), nil},
		{"the image may hold it", decl("oci-archive:/x.tar", nil, "python3", "train.py"), nil},
		{"the folder staged, not started in", decl("", codeIn, "python3", "train.py"), []string{"the job sees at /code/train.py", "or start it there with --workdir /code"}},
		{"started in the folder staged", in(decl("", codeIn, "python3", "train.py", "data/train.csv"), "/code"), nil},
		{"started elsewhere", in(decl("", dataIn, "python3", "/code/t.py", "train.csv"), "/work"), nil},
		{"started in another folder", in(decl("", codeIn, "python3", "train.py"), "/code/data"), []string{"the job sees at /code/train.py, not in the folder it starts in (/code/data)"}},
		{"not staged, started in a workdir", in(decl("", nil, "python3", "train.py"), "/work"), []string{"the job starts in /work on the provider", "--input ./train.py:/code/train.py"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := unstagedPaths(tc.d, dir)
			if len(tc.want) == 0 {
				if len(notes) != 0 {
					t.Fatalf("notes %q, want none", notes)
				}
				return
			}
			if len(notes) != 1 {
				t.Fatalf("notes %q, want one", notes)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes[0], w) {
					t.Errorf("note %q lacks %q", notes[0], w)
				}
			}
		})
	}
}

// An image named without a transport gets the one its path, or a
// registry, takes.
func TestRefHint(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "img.tar"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "layout"), 0o755); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"./img.tar":             "name it oci-archive:./img.tar (podman save --format oci-archive) or docker-archive:./img.tar",
		"layout":                "named oci:layout",
		"busybox:1.36":          "docker://busybox:1.36",
		"./gone.tar":            "./gone.tar: no such file or folder",
		"oci-archive:./img.tar": "",
		"docker://busybox":      "",
		"":                      "",
	} {
		got := refHint(ref, dir)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("refHint(%q) = %q, want %q", ref, got, want)
		}
	}
	// A declaration file names the fix below the validation error.
	decl := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(decl, []byte("name: t\nwork:\n  image: ./img.tar\n  command: [\"true\"]\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := declarationFromFile(decl); err == nil || !strings.Contains(err.Error(), "name it oci-archive:./img.tar") {
		t.Errorf("declaration with image ./img.tar: %v", err)
	}
}

// TestSecretEnv: variables named or valued like credentials, and
// arguments valued like them, are warned of with how to pass them as
// secrets, without repeating the value; others are not.
func TestSecretEnv(t *testing.T) {
	d := market.Declaration{Work: market.Work{Command: []string{"python3", "train.py", "--token=hf_0123456789abcdef", "ghp_0123456789abcdefghij", "--seed=1",
		"--out=runs/experiment-42/learning-rate-3e-4", "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"}, Env: map[string]string{
		"HF_TOKEN":               "x",
		"WANDB_API_KEY":          "x",
		"AWS_SECRET_ACCESS_KEY":  "x",
		"db-password":            "x",
		"OPENAI":                 "sk-proj-0123456789abcdef",
		"SEED":                   "1",
		"AUTHOR":                 "me",
		"TOKENIZERS_PARALLELISM": "false",
		"MODEL":                  "hf_internal", // a prefix, but too short to be a token
		"WB":                     "0123456789abcdef0123456789abcdef01234567",
		"S3":                     "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY12",
		"GOOGLE":                 "AIzaSyD-0123456789abcdefghij",
		"RUN":                    "b3-resnet50-imagenet-baseline-v2",
		"DIGITS":                 "12345678901234567890123456789012345",
	}}}
	notes := credentialNotes(d)
	var got []string
	for _, n := range notes {
		got = append(got, strings.Fields(n)[1])
		if !strings.Contains(n, "broadcast to every peer") || !strings.Contains(n, "--secret ") || strings.Contains(n, "hf_0123") || strings.Contains(n, "ghp_") || strings.Contains(n, "0123456789abcdef") {
			t.Errorf("warning %q does not say why and what to do, or repeats the value", n)
		}
	}
	want := []string{"AWS_SECRET_ACCESS_KEY", "GOOGLE", "HF_TOKEN", "OPENAI", "S3", "WANDB_API_KEY", "WB", "db-password", "2", "3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("warned of %v, want %v", got, want)
	}
	if !strings.Contains(notes[2], "--secret HF_TOKEN in place of --env") || !strings.Contains(notes[2], "secrets: [HF_TOKEN]") {
		t.Errorf("HF_TOKEN warning: %q", notes[2])
	}
	if !strings.Contains(notes[7], "--secret NAME") {
		t.Errorf("db-password warning: %q", notes[7])
	}
}

// A command naming a file here that the job will not find is refused
// before anything reaches the daemon, unless --force.
func TestSubmitRefusesUnstagedScript(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("train.py", []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var submitted atomic.Int32
	daemon := countingSubmits(&submitted)
	args := []string{"submit", "--gpus", "1", "--limit", "1h", "--", "python3", "train.py"}
	if _, err := runCLI(t, daemon, args...); err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), `"train.py"`) {
		t.Fatalf("an unstaged script: %v, want a refusal naming it and --force", err)
	}
	if submitted.Load() != 0 {
		t.Fatal("the refused job reached the daemon")
	}
	// The fake daemon does not answer as a real one does (progress, then
	// the job); what matters is that the job reached it.
	out, err := runCLI(t, daemon, append([]string{"submit", "--force"}, args[1:]...)...)
	if submitted.Load() != 1 || !strings.Contains(out, "note:") {
		t.Fatalf("with --force: %v, %d submitted, want one with the note\n%s", err, submitted.Load(), out)
	}
}

func TestReadOnlyWrites(t *testing.T) {
	decl := func(cmd ...string) market.Declaration {
		d := market.NewDeclaration("t", cmd, 1, 0, []market.Input{{Source: "/here/data", Mount: "/data"}})
		d.Output.Path = "/out"
		return d
	}
	withCheckpoints := func(d market.Declaration, p string) market.Declaration {
		d.Output.Checkpoints = &market.Checkpoints{Path: p, Every: 10 * market.Minute}
		return d
	}
	withImage := func(d market.Declaration) market.Declaration {
		d.Work.Image = "docker://python:3.12"
		return d
	}
	withEnv := func(d market.Declaration, k, v string) market.Declaration {
		d.Work.Env = map[string]string{k: v}
		return d
	}
	for _, tc := range []struct {
		name string
		d    market.Declaration
		want []string // substrings of the one note; none for no note
	}{
		{"checkpoints to an undeclared folder", decl("python3", "/code/train.py", "--checkpoint-dir", "/ckpt"),
			[]string{"--checkpoint-dir /ckpt: the job would write to /ckpt", "--checkpoint-path /ckpt"}},
		{"flag=value form", decl("python3", "/code/train.py", "--save_dir=/results/run1"), []string{"--save_dir=/results/run1", "write to /results/run1"}},
		{"in the environment", withEnv(decl("python3", "/code/train.py"), "CHECKPOINT_DIR", "/ckpt"), []string{"work.env CHECKPOINT_DIR=/ckpt"}},
		{"declared as the checkpoint path", withCheckpoints(decl("python3", "/code/train.py", "--checkpoint-dir", "/ckpt/run"), "/ckpt"), nil},
		{"under the output path", decl("python3", "/code/train.py", "--output_dir", "/out/model"), nil},
		{"in /tmp", decl("python3", "/code/train.py", "--ckpt", "/tmp/ck"), nil},
		{"a checkpoint it reads", decl("python3", "/code/train.py", "--resume_from_checkpoint", "/ckpt/step-9"), nil},
		{"under a data input", decl("python3", "/code/train.py", "--save-dir", "/data/x"), nil},
		{"not a path", decl("python3", "/code/train.py", "--save-every", "100"), nil},
		{"a flag that does not write", decl("python3", "/code/train.py", "--config", "/etc/x.yaml"), nil},
		{"an image's root is writable", withImage(decl("python3", "/code/train.py", "--checkpoint-dir", "/ckpt")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := readOnlyWrites(tc.d)
			if len(tc.want) == 0 {
				if len(notes) != 0 {
					t.Fatalf("notes %q, want none", notes)
				}
				return
			}
			if len(notes) != 1 {
				t.Fatalf("notes %q, want one", notes)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes[0], w) {
					t.Errorf("note %q lacks %q", notes[0], w)
				}
			}
		})
	}
}

// A command that writes its checkpoints where the sandbox is read-only is
// refused before anything reaches the daemon, unless --force.
func TestSubmitRefusesReadOnlyCheckpointDir(t *testing.T) {
	t.Chdir(t.TempDir())
	var submitted atomic.Int32
	daemon := countingSubmits(&submitted)
	args := []string{"submit", "--gpus", "1", "--limit", "1h", "--", "python3", "/usr/lib/x/train.py", "--checkpoint-dir", "/ckpt"}
	_, err := runCLI(t, daemon, args...)
	if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "--checkpoint-path /ckpt") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("checkpoints to a read-only folder: %v, want a refusal saying how to declare it", err)
	}
	if submitted.Load() != 0 {
		t.Fatal("the refused job reached the daemon")
	}
	// Declared, the same command is submitted.
	declared := append([]string{"submit", "--checkpoint-path", "/ckpt", "--checkpoint-every", "10m"}, args[1:]...)
	if _, err := runCLI(t, daemon, declared...); submitted.Load() != 1 {
		t.Fatalf("with the checkpoint path declared: %v, %d submitted", err, submitted.Load())
	}
}

// countingSubmits is a daemon that takes every submit, counting it, and
// knows nothing else.
func countingSubmits(submitted *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/jobs" {
			submitted.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(api.Job{ID: "j1", State: api.JobQueued})
			return
		}
		http.NotFound(w, r)
	})
}
