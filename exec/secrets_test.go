package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
)

// secretScript is what a job with the secrets HF_TOKEN and CREDS (which
// holds a NUL) checks and reports in its output folder: the hashes of the
// variable and of the files, the files' modes and owners, the folder's
// file system. It cannot write there; it then waits for the test to let it
// end (/out/go), so that the test sees the sandbox while it runs.
const secretScript = `set -e
echo "$(id -u) $(id -g)" > /out/ids
printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1 > /out/env
if [ -n "${CREDS+x}" ]; then echo "CREDS, with a NUL, is a variable"; exit 1; fi
sha256sum /run/secrets/HF_TOKEN /run/secrets/CREDS | cut -d' ' -f1 > /out/files
stat -c '%a %u %g' /run/secrets/HF_TOKEN /run/secrets/CREDS > /out/modes
stat -c '%a %u' /run/secrets > /out/folder
awk '$2 == "/run/secrets" { split($4, o, ","); print $3, o[1] }' /proc/self/mounts > /out/fs
if sh -c 'echo x > /run/secrets/HF_TOKEN' 2>/dev/null; then echo "wrote a secret"; exit 1; fi
if sh -c 'touch /run/secrets/new' 2>/dev/null; then echo "made a file among the secrets"; exit 1; fi
touch /out/ready
i=0
while [ ! -e /out/go ]; do i=$((i+1)); [ $i -lt 3000 ] || exit 3; sleep 0.02; done
`

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "hf_" + hex.EncodeToString(b)
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// runSecretJob runs s, whose script is secretScript, and checks while it
// runs that its bundle, config and secrets are on a tmpfs; then checks
// that nothing of the run outlives it and that nothing the run left on
// disk holds a secret's value.
func runSecretJob(t *testing.T, r *Runner, s Spec) Result {
	t.Helper()
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(context.Background(), s)
		done <- ran{res, err}
	}()
	ready := filepath.Join(s.Output.Source, "ready")
	var end *ran
	poll.Until(t, "the job to report", 90*time.Second, func() bool {
		select {
		case got := <-done:
			end = &got
			return true
		default:
		}
		_, err := os.Stat(ready)
		return err == nil
	})
	if end != nil {
		t.Fatalf("the job ended before it reported: %+v, %v\nstderr: %s", end.res, end.err, readFile(t, end.res.Stderr))
	}
	bundle := r.BundleDir(s.ID, s.Dir)
	if m, err := mountedUnder(bundle); err != nil || len(m) == 0 || m[0] != bundle {
		t.Errorf("the bundle %s is not a mount of its own: %v %v", bundle, m, err)
	}
	for _, p := range []string{bundle, filepath.Join(bundle, "config.json"), filepath.Join(bundle, secretsFolder, "HF_TOKEN")} {
		if !onTmpfs(p) {
			t.Errorf("%s is not on a tmpfs", p)
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(bundle, "config.json")); err != nil || !bytes.Contains(cfg, s.Secrets["HF_TOKEN"]) {
		t.Errorf("the config does not set HF_TOKEN (%v)", err)
	}
	must(t, os.WriteFile(filepath.Join(s.Output.Source, "go"), nil, 0o644))
	got := <-done
	if got.err != nil {
		t.Fatalf("Run: %v (%+v)", got.err, got.res)
	}
	t.Logf("%s/%s exit %d %q\nstdout: %s\nstderr: %s", got.res.Outcome, got.res.Attribution, got.res.ExitCode, got.res.Reason,
		readFile(t, got.res.Stdout), readFile(t, got.res.Stderr))
	assertGone(t, r, s)
	if _, err := os.Stat(bundle); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the bundle is left: %v", err)
	}
	// Nothing the run left holds a value: the logs, the output, the
	// lease folder.
	err := filepath.WalkDir(filepath.Dir(s.Dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for name, v := range s.Secrets {
			if bytes.Contains(b, v) {
				t.Errorf("%s holds the value of %s", p, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got.res
}

// checkSecretOutput checks what secretScript reported, for a job whose
// user inside the sandbox is uid, or any with uid "".
func checkSecretOutput(t *testing.T, s Spec, uid string) {
	t.Helper()
	out := func(name string) string { return strings.TrimSpace(readFile(t, filepath.Join(s.Output.Source, name))) }
	ids := strings.Fields(out("ids"))
	if len(ids) != 2 || uid != "" && ids[0] != uid {
		t.Fatalf("the job ran as %q, want %s", ids, uid)
	}
	if got, want := out("env"), sha(s.Secrets["HF_TOKEN"]); got != want {
		t.Errorf("$HF_TOKEN hashes to %s, want %s", got, want)
	}
	if got, want := out("files"), sha(s.Secrets["HF_TOKEN"])+"\n"+sha(s.Secrets["CREDS"]); got != want {
		t.Errorf("the files hash to\n%s\nwant\n%s", got, want)
	}
	own := "400 " + ids[0] + " " + ids[1]
	if got, want := out("modes"), own+"\n"+own; got != want {
		t.Errorf("the files' modes and owners:\n%s\nwant\n%s", got, want)
	}
	if got, want := out("folder"), "500 "+ids[0]; got != want {
		t.Errorf("/run/secrets is %s, want %s", got, want)
	}
	if got := out("fs"); got != "tmpfs ro" {
		t.Errorf("/run/secrets is mounted %q, not a read-only tmpfs", got)
	}
}

// TestSecrets: a job on the host's root reads its secrets as variables
// and as files under /run/secrets, 0400 and its user's, on a tmpfs,
// read-only;
// a value with a NUL is a file only. While it runs the bundle, whose
// config holds the variables, is a tmpfs of its own; after, nothing of the
// run on disk holds a value.
func TestSecrets(t *testing.T) {
	r := newTestRunner(t)
	s := testSpec(t, "", secretScript)
	s.Secrets = map[string][]byte{"HF_TOKEN": []byte(randomToken(t)), "CREDS": []byte("{\"key\": \"" + randomToken(t) + "\"}\n\x00tail")}
	res := runSecretJob(t, r, s)
	wantOutcome(t, res, Completed, ByJob)
	checkSecretOutput(t, s, "")
}

// TestSecretsImage: the same in the job's own image, as the image's user:
// the files are that user's inside the user namespace.
func TestSecretsImage(t *testing.T) {
	r := newTestRunner(t)
	layers := testImage(t, r.uidBase)
	s := imageSpec(t, "", layers, secretScript)
	s.Image.Config.User = "worker"
	s.Secrets = map[string][]byte{"HF_TOKEN": []byte(randomToken(t)), "CREDS": []byte("c\x00" + randomToken(t))}
	res := runSecretJob(t, r, s)
	wantOutcome(t, res, Completed, ByJob)
	checkSecretOutput(t, s, "1000")
	assertNoMounts(t, r)
}

// A spec whose secrets are not variable names, or that mounts something
// of the job where they go, is refused before anything runs.
func TestSecretsSpecRefused(t *testing.T) {
	base := testSpec(t, "", "true")
	for name, edit := range map[string]func(*Spec){
		"a name with a slash": func(s *Spec) { s.Secrets = map[string][]byte{"../x": nil} },
		"a name with =":       func(s *Spec) { s.Secrets = map[string][]byte{"A=B": nil} },
		"an input inside":     func(s *Spec) { s.Inputs = []Mount{{Source: "/x", Target: "/run/secrets/T"}} },
		"an input above":      func(s *Spec) { s.Inputs = []Mount{{Source: "/x", Target: "/run"}} },
		"the output there":    func(s *Spec) { s.Output.Target = "/run/secrets" },
	} {
		s := base
		s.Secrets = map[string][]byte{"T": []byte("v")}
		edit(&s)
		if _, err := s.withDefaults(); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
	s := base
	s.Inputs = []Mount{{Source: "/x", Target: "/run/secrets/t"}}
	if _, err := s.withDefaults(); err != nil {
		t.Errorf("an input at /run/secrets without secrets: %v", err)
	}
}
