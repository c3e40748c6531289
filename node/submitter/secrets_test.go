package submitter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

// lockedBuffer collects log lines written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secretsHarness is a harness whose provider h.prov holds an offer and
// is what this node's Match gives every job, and whose log is kept.
type secretsHarness struct {
	*harness
	log *lockedBuffer
}

func newSecretsHarness(t *testing.T, cfg Config) *secretsHarness {
	t.Helper()
	h := newHarness(t, cfg, nil)
	h.s.d.Offers = offersOf{h.prov.ID.String(): offerOf(h.prov.ID, 8, "P")}
	h.s.d.Placement = anyJob{h.prov.ID.String()}
	buf := &lockedBuffer{}
	h.s.log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &secretsHarness{h, buf}
}

// anyJob is a Match that gives every job to one provider.
type anyJob struct{ provider string }

func (a anyJob) Assigns(_, provider string, _ time.Time) bool { return provider == a.provider }

// propose sends h.prov's proposal for job id, as an honest provider makes
// it now, and returns the reply.
func (h *secretsHarness) propose(t *testing.T, id string) (wire.ProposeReply, error) {
	t.Helper()
	j := h.s.jobs.get(id)
	if j == nil {
		t.Fatalf("no job %s", id)
	}
	raw := proposal(t, j, h.prov, h.sub.ID, time.Now(), []string{"P-0"}, nil)
	out, err := h.s.HandleProposal(context.Background(), h.prov.ID, raw)
	if err != nil {
		return wire.ProposeReply{}, err
	}
	// As the provider reads it, off the wire.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.ProposeReply
	if err := p2p.DecodeStrict(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, nil
}

// end ends an attempt as its provider's loss, or with outcome and
// attribution, as a receipt would.
func (h *secretsHarness) end(t *testing.T, id string, o ledger.Outcome, a ledger.Attribution) {
	t.Helper()
	if err := h.s.jobs.get(id).update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, o, a
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// kept is what the store holds for job under the secrets' prefix.
func (h *secretsHarness) kept(t *testing.T, job string) map[string][]byte {
	t.Helper()
	var s storedSecrets
	ok, err := h.records.Get(state.PrefixSecret, job, &s)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return s.Values
}

// holds reports whether b holds value, as it is or in base64.
func holds(b []byte, value string) bool {
	return bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(value))))
}

// TestSecretsKeptApart: a job's secrets are signed and broadcast by name
// alone; their values are kept on this node under the secrets' prefix,
// never in the job's record, its API view or a log line, and go to a
// provider only in the reply that carries the countersignature.
func TestSecretsKeptApart(t *testing.T) {
	h := newSecretsHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour})
	ctx := context.Background()
	const token, creds = "hf_kE8wq2VZqY7nQmTz4LpR", "{\"key\": \"c0ffee-5ecret-bytes\"}"
	d := market.NewDeclaration("train", []string{"python3", "/code/train.py"}, 1, market.Hour, nil)
	d.Secrets = []market.Secret{{Name: "HF_TOKEN"}, {Name: "CREDS", From: "file:/home/alice/creds.json"}}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string][]byte{"HF_TOKEN": []byte(token), "CREDS": []byte(creds)}

	for _, c := range []struct {
		name   string
		values map[string][]byte
		want   string
	}{
		{"a value missing", map[string][]byte{"HF_TOKEN": []byte(token)}, "no value was given for CREDS"},
		{"a value not declared", map[string][]byte{"HF_TOKEN": nil, "CREDS": nil, "OTHER": nil}, "OTHER"},
	} {
		if _, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: c.values}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if n := h.gossip.rawCount(); n != 0 {
		t.Fatalf("%d declarations broadcast for refused submits", n)
	}

	j, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: values}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if ok, err := h.records.Get(state.PrefixJob, j.ID, &rec); !ok || err != nil {
		t.Fatalf("record of %s: %v %v", j.ID, ok, err)
	}
	if !bytes.Contains(rec.Envelope, []byte(`"secrets":[{"name":"HF_TOKEN"},{"name":"CREDS"}]`)) || bytes.Contains(rec.Envelope, []byte("creds.json")) {
		t.Fatalf("the signed declaration:\n%s", rec.Envelope)
	}
	// Every record of the job's, and its view, hold neither value.
	err = h.records.Each(state.PrefixJob, func(b []byte) error {
		if holds(b, token) || holds(b, creds) {
			t.Errorf("a job record holds a secret's value:\n%s", b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	view, _ := json.Marshal(h.job(t, j.ID))
	if holds(view, token) || holds(view, creds) {
		t.Fatalf("the job's view holds a secret's value:\n%s", view)
	}
	if got := h.kept(t, j.ID); string(got["HF_TOKEN"]) != token || string(got["CREDS"]) != creds {
		t.Fatalf("kept under %s%s: %q", state.PrefixSecret, j.ID, got)
	}

	// A proposal that is refused carries nothing; the one countersigned
	// carries the values, and a later one for the leased job nothing.
	stranger := wiretest.FreshParty(t)
	jt := h.s.jobs.get(j.ID)
	if out, err := h.s.HandleProposal(ctx, stranger.ID, proposal(t, jt, stranger, h.sub.ID, time.Now(), []string{"X-0"}, nil)); p2p.RefusalCode(err) != wire.CodeNoOffer || out != nil {
		t.Fatalf("a stranger's proposal: %v, %v", out, err)
	}
	rep, err := h.propose(t, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SubmitterSig) == 0 || string(rep.Secrets["HF_TOKEN"]) != token || string(rep.Secrets["CREDS"]) != creds || len(rep.Secrets) != 2 {
		t.Fatalf("the countersigned reply: sig %d bytes, secrets %q", len(rep.SubmitterSig), rep.Secrets)
	}
	if _, err := h.propose(t, j.ID); p2p.RefusalCode(err) != wire.CodeNotQueued {
		t.Fatalf("a second proposal for the leased job: %v", err)
	}
	if logs := h.log.String(); holds([]byte(logs), token) || holds([]byte(logs), creds) {
		t.Fatalf("the log holds a secret's value:\n%s", logs)
	}

	// A job that declares none gets none.
	plain := market.NewDeclaration("plain", []string{"true"}, 1, market.Hour, nil)
	raw, _ = json.Marshal(plain)
	p, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := h.propose(t, p.ID); err != nil || rep.Secrets != nil {
		t.Fatalf("a job without secrets: %v, %q", err, rep.Secrets)
	}
}

// TestSecretsFollowTheJob: a job's resumption and its retry read the values
// kept for it, which stay while one is still due and go once the job has
// ended for good; resumed by hand after that, it is given them again.
// Every task of an array reads the array's.
func TestSecretsFollowTheJob(t *testing.T) {
	h := newSecretsHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour})
	ctx := context.Background()
	d := market.NewDeclaration("train", []string{"python3", "/code/train.py"}, 1, market.Hour, nil)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: 2}
	d.Request.Retries = 1
	d.Secrets = []market.Secret{{Name: "WANDB_API_KEY"}}
	raw, _ := json.Marshal(d)
	j, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: map[string][]byte{"WANDB_API_KEY": []byte("first")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.propose(t, j.ID); err != nil {
		t.Fatal(err)
	}

	// Lost with its provider: the resumption is due, and the values stay.
	h.end(t, j.ID, ledger.OutcomeProviderLost, ledger.AttributionProvider)
	h.s.dropEndedSecrets()
	if h.kept(t, j.ID) == nil {
		t.Fatal("the values were dropped while a resumption was due")
	}
	h.s.autoResume(ctx, j.ID)
	second := lastAttempt(h.job(t, j.ID))
	if second == j.ID {
		t.Fatal("not resumed")
	}
	rep, err := h.propose(t, second)
	if err != nil || string(rep.Secrets["WANDB_API_KEY"]) != "first" {
		t.Fatalf("the resumption's lease: %v, %q", err, rep.Secrets)
	}

	// Failed by its own fault, with a retry left: the retry reads them.
	h.end(t, second, ledger.OutcomeFailed, ledger.AttributionJob)
	h.s.dropEndedSecrets()
	h.s.autoResume(ctx, second)
	third := lastAttempt(h.job(t, j.ID))
	if third == second {
		t.Fatal("not retried")
	}
	if rep, err := h.propose(t, third); err != nil || string(rep.Secrets["WANDB_API_KEY"]) != "first" {
		t.Fatalf("the retry's lease: %v, %q", err, rep.Secrets)
	}

	// Completed: the job has ended for good, and the values go.
	h.end(t, third, ledger.OutcomeCompleted, ledger.AttributionJob)
	h.s.dropEndedSecrets()
	if got := h.kept(t, j.ID); got != nil || h.s.secrets.has(j.ID) {
		t.Fatalf("kept after the job ended: %q", got)
	}
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: j.ID, FromStart: true}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "e31 resume --secret") {
		t.Fatalf("resumed by hand without the values: %v", err)
	}
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: j.ID, FromStart: true, Secrets: map[string][]byte{"OTHER": nil}}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("resumed by hand with the wrong values: %v", err)
	}
	again, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: j.ID, FromStart: true, Secrets: map[string][]byte{"WANDB_API_KEY": []byte("second")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := h.propose(t, lastAttempt(again)); err != nil || string(rep.Secrets["WANDB_API_KEY"]) != "second" {
		t.Fatalf("the lease of the attempt resumed by hand: %v, %q", err, rep.Secrets)
	}

	// An array: every task reads the array's values, kept once.
	a := market.NewDeclaration("sweep", []string{"true"}, 1, market.Hour, nil)
	a.Array = &market.Array{Count: 3}
	a.Secrets = []market.Secret{{Name: "HF_TOKEN"}}
	raw, _ = json.Marshal(a)
	arr, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: map[string][]byte{"HF_TOKEN": []byte("hf_array")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if rep, err := h.propose(t, market.TaskID(arr.ID, i)); err != nil || string(rep.Secrets["HF_TOKEN"]) != "hf_array" {
			t.Fatalf("task %d: %v, %q", i, err, rep.Secrets)
		}
	}
	n := 0
	if err := h.records.Each(state.PrefixSecret, func([]byte) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("%d jobs' values kept (%v), want the job's and the array's", n, err)
	}
}

// TestSecretsLeftBySubmitStoppedHalfway: values a previous run kept for a
// job it never registered go at the first sweep; those of a job held are
// kept.
func TestSecretsLeftBySubmitStoppedHalfway(t *testing.T) {
	h := newSecretsHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour})
	if err := h.records.Put(state.PrefixSecret, "orphan", storedSecrets{Job: "orphan", Values: map[string][]byte{"T": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("live", []string{"true"}, 1, market.Hour, nil)
	d.Secrets = []market.Secret{{Name: "T"}}
	h.endedJob(t, "livejob", d, "")
	if err := h.s.jobs.get("livejob").update(func(r *Record) error { r.State, r.Outcome = api.JobQueued, ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.records.Put(state.PrefixSecret, "livejob", storedSecrets{Job: "livejob", Values: map[string][]byte{"T": []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	h.s.dropEndedSecrets()
	if h.kept(t, "orphan") != nil {
		t.Error("the values of a job never registered are kept")
	}
	if h.kept(t, "livejob") == nil {
		t.Error("the values of a queued job were dropped")
	}
	if rep, err := h.propose(t, "livejob"); err != nil || string(rep.Secrets["T"]) != "y" {
		t.Fatalf("the recovered job's lease: %v, %q", err, rep.Secrets)
	}
}
