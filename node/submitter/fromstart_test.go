package submitter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire/wiretest"
)

// endedJob stores, as a previous run would have, a job that ended with
// its provider lost, declared d, and loads it.
func (h *harness) endedJob(t *testing.T, id string, d market.Declaration, checkpoint string) {
	t.Helper()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r := &Record{ID: id, Declaration: d, State: api.JobReleased, Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, RecordOutput: RecordOutput{Checkpoint: checkpoint}, Submitted: now}
	r.step(api.StepSubmit, now)
	if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
}

// storedDeclaration is the declaration a job's record holds.
func (h *harness) storedDeclaration(t *testing.T, id string) market.Declaration {
	t.Helper()
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, id, &r); !ok || err != nil {
		t.Fatalf("record of %s: %v %v", id, ok, err)
	}
	return r.Declaration
}

// TestResumeFromStart: a job with nothing to resume from is refused by a
// plain resume, naming --from-start, which runs its declaration again as
// first submitted; a resumption run from the start loses its checkpoint
// and E31_RESUME_FROM, and keeps the job's own variables.
func TestResumeFromStart(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()

	plain := market.NewDeclaration("plain", []string{"python3", "/code/train.py"}, 1, market.Hour, nil)
	h.endedJob(t, "plainjob", plain, "")
	_, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "plainjob"}, nil)
	if err == nil || !strings.Contains(err.Error(), "declares no checkpoints") || !strings.Contains(err.Error(), "e31 resume --from-start plainjob") {
		t.Fatalf("plain resume of a job without checkpoints: %v", err)
	}
	j, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "plainjob", FromStart: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "plainjob" || j.State != api.JobQueued || len(j.Attempts) != 2 {
		t.Fatalf("from the start: %+v", j)
	}
	if got := h.storedDeclaration(t, lastAttempt(j)); strings.Join(got.Work.Command, " ") != "python3 /code/train.py" || got.Name != "plain" {
		t.Fatalf("declaration run again: %+v", got.Work)
	}

	resumed := market.NewDeclaration("resumed", []string{"true"}, 1, market.Hour, nil)
	resumed.Work.Env = map[string]string{"SEED": "1", "E31_RESUME_FROM": "/ckpt"}
	from := wiretest.CID(t, "checkpoint")
	resumed.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: 1, From: from}
	h.endedJob(t, "resumedjob", resumed, wiretest.CID(t, "later checkpoint"))
	j, err = h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "resumedjob", FromStart: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := h.storedDeclaration(t, lastAttempt(j))
	if got.Output.Checkpoints == nil || got.Output.Checkpoints.From != "" || got.Output.Checkpoints.Path != "/ckpt" {
		t.Fatalf("checkpoints run again from the start: %+v", got.Output.Checkpoints)
	}
	if _, ok := got.Work.Env["E31_RESUME_FROM"]; ok || got.Work.Env["SEED"] != "1" {
		t.Fatalf("env run again from the start: %v", got.Work.Env)
	}
	// The job it came from keeps its own declaration.
	if d := h.storedDeclaration(t, "resumedjob"); d.Output.Checkpoints.From != from || d.Work.Env["E31_RESUME_FROM"] != "/ckpt" {
		t.Fatalf("the earlier job's declaration changed: %+v %v", d.Output.Checkpoints, d.Work.Env)
	}
	// A job is resumed as its last attempt, which must have ended.
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "resumedjob"}, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "still queued") {
		t.Fatalf("resume of a job whose last attempt is queued: %v", err)
	}
	// Without --from-start, it resumes from its last checkpoint.
	h.endedJob(t, "resumedtoo", resumed, wiretest.CID(t, "later checkpoint"))
	j, err = h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "resumedtoo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.storedDeclaration(t, lastAttempt(j)); got.Output.Checkpoints.From != wiretest.CID(t, "later checkpoint") {
		t.Fatalf("plain resume starts from %q", got.Output.Checkpoints.From)
	}
}

// lastAttempt is the ID of a job's last attempt.
func lastAttempt(j api.Job) string { return j.Attempts[len(j.Attempts)-1].ID }
