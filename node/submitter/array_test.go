package submitter

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
)

// readValuesFile takes one value a line, CRLF or LF, with or without a
// last newline, and refuses a relative path, an empty file and one larger
// than a signed declaration may be.
func TestReadValuesFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := &market.Array{ValuesFile: write("v.txt", "a\r\nb c\r\n\r\nd")}
	if err := readValuesFile(a); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b c", "", "d"}; !slices.Equal(a.Values, want) || a.ValuesFile != "" {
		t.Fatalf("values %q (file %q), want %q", a.Values, a.ValuesFile, want)
	}
	for _, tc := range []struct{ file, want string }{
		{"v.txt", "is not an absolute path"},
		{write("empty.txt", ""), "has no values"},
		{write("big.txt", strings.Repeat("x\n", wire.MaxDeclarationEnvelope)), "over"},
		{filepath.Join(dir, "missing.txt"), "no such file"},
	} {
		err := readValuesFile(&market.Array{ValuesFile: tc.file})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values_file %s: %v, want %q", filepath.Base(tc.file), err, tc.want)
		}
	}
}

// A task lost with its provider runs again from the beginning, though it
// declared no checkpoints and no resume, up to DefaultMaxResumes times.
func TestLostTaskRunsAgain(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	id := market.TaskID("arrayx", 2)
	d := market.NewDeclaration("sweep", []string{"sim"}, 1, market.Hour, nil)
	h.endedJob(t, id, d, "")
	j := h.job(t, id)
	if j.State != api.JobQueued || !strings.Contains(j.Reason, "starts from the beginning") {
		t.Fatalf("a lost task: %s, %q", j.State, j.Reason)
	}
	for n := 1; n <= market.DefaultMaxResumes; n++ {
		h.s.autoResume(ctx, j.Attempts[len(j.Attempts)-1].ID)
		j = h.job(t, id)
		if len(j.Attempts) != n+1 {
			t.Fatalf("after resume %d: %d attempts", n, len(j.Attempts))
		}
		if err := h.s.jobs.get(j.Attempts[n].ID).update(func(r *Record) error {
			r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeProviderLost, ledger.AttributionProvider
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if j = h.job(t, id); !j.State.Terminal() || j.Outcome != string(ledger.OutcomeProviderLost) {
		t.Fatalf("resumes used up: %s %s", j.State, j.Outcome)
	}
	// A job that is no task, lost the same way, stays lost.
	h.endedJob(t, "plainjob", d, "")
	if j := h.job(t, "plainjob"); !j.State.Terminal() {
		t.Fatalf("a lost job that declared no resume: %s", j.State)
	}
}
