package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// submitArray submits an array of n tasks running cmd and ends each task
// as ends says (completed where it does not say).
func (h *harness) submitArray(t *testing.T, n int, cmd []string, ends map[int]ledger.Outcome) string {
	t.Helper()
	d := market.NewDeclaration("sweep", cmd, 1, market.Hour, nil)
	d.Array = &market.Array{Count: n}
	raw, _ := json.Marshal(d)
	arr, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		h.endAttempt(t, market.TaskID(arr.ID, i), ends[i])
	}
	return arr.ID
}

// endAttempt ends a job's attempt, released with outcome (completed if
// none), as its final receipt would.
func (h *harness) endAttempt(t *testing.T, id string, outcome ledger.Outcome) {
	t.Helper()
	if outcome == "" {
		outcome = ledger.OutcomeCompleted
	}
	if err := h.s.jobs.get(id).update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, outcome, ledger.AttributionSubmitter
		if outcome == ledger.OutcomeWithdrawn {
			r.State = api.JobWithdrawn
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// announced is the declaration of a job as it was signed and announced,
// as a peer reads it, its signer and the job it says it resumes.
func (h *harness) announced(t *testing.T, id string) (market.Declaration, string, string) {
	t.Helper()
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, id, &r); !ok || err != nil {
		t.Fatalf("record of %s: %v %v", id, ok, err)
	}
	env, err := p2p.Open(r.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	var body wire.DeclarationBody
	if err := json.Unmarshal(env.Message.Body, &body); err != nil {
		t.Fatal(err)
	}
	if got := wire.JobID(env); got != id {
		t.Fatalf("the envelope of %s is that of %s", id, got)
	}
	return body.Declaration, env.Signer.String(), body.ResumeOf
}

// TestRerunFailedTasksWithNewWork: e31 resume ARRAY --failed --with FILE
// runs exactly the failed tasks again, each as the next attempt of the
// same task under its index, in a declaration signed and announced as the
// resumption of the attempt before; the tasks that completed are left as
// they were, the array keeps its ID and declaration, and completes once
// the new attempts do.
func TestRerunFailedTasksWithNewWork(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	id := h.submitArray(t, 6, []string{"sh", "-c", "buggy"}, map[int]ledger.Outcome{2: ledger.OutcomeFailed, 4: ledger.OutcomeFailed})
	if j := h.job(t, id); j.Outcome != string(ledger.OutcomeFailed) || !slices.Equal(j.Tasks.FailedIndices, []int{2, 4}) {
		t.Fatalf("before: %s, failed %v", j.Outcome, j.Tasks.FailedIndices)
	}
	fixed := market.NewDeclaration("sweep-fixed", []string{"sh", "-c", "fixed"}, 1, market.Hour, nil)
	raw, _ := json.Marshal(fixed)
	before := h.gossip.rawCount()
	out, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: id, Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != id || out.State == api.JobReleased {
		t.Fatalf("the array after the rerun: %s %s, want %s going on", out.ID, out.State, id)
	}
	if got := h.gossip.rawCount() - before; got != 2 {
		t.Fatalf("%d declarations announced, want one for each task run again", got)
	}
	for i := range 6 {
		tj := h.job(t, market.TaskID(id, i))
		if want := map[bool]int{true: 2, false: 1}[i == 2 || i == 4]; len(tj.Attempts) != want {
			t.Fatalf("task %d has %d attempts, want %d", i, len(tj.Attempts), want)
		}
		if i != 2 && i != 4 {
			continue
		}
		if tj.ID != market.TaskID(id, i) || tj.Attempts[0].ID != market.TaskID(id, i) || tj.Attempts[0].Outcome != string(ledger.OutcomeFailed) {
			t.Fatalf("task %d: %s, first attempt %+v", i, tj.ID, tj.Attempts[0])
		}
		next := tj.Attempts[1].ID
		d := h.storedDeclaration(t, next)
		if !slices.Equal(d.Work.Command, fixed.Work.Command) || d.Array != nil {
			t.Fatalf("task %d's new attempt runs %v (array %v)", i, d.Work.Command, d.Array)
		}
		if d.Work.Env[market.EnvTaskIndex] != []string{"2", "4"}[i/4] || d.Work.Env[market.EnvTaskCount] != "6" {
			t.Fatalf("task %d's new attempt sees %v", i, d.Work.Env)
		}
		if a, signer, resumes := h.announced(t, next); signer != h.sub.ID.String() || resumes != market.TaskID(id, i) || !slices.Equal(a.Work.Command, fixed.Work.Command) {
			t.Fatalf("task %d's new attempt announced %v, signed by %s, as the resumption of %q", i, a.Work.Command, signer, resumes)
		}
		h.endAttempt(t, next, "")
	}
	if d := h.storedDeclaration(t, id); !slices.Equal(d.Work.Command, []string{"sh", "-c", "buggy"}) || d.Array.Tasks() != 6 {
		t.Fatalf("the array's own declaration became %v", d.Work.Command)
	}
	if j := h.job(t, id); j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeCompleted) || j.Tasks.Completed != 6 {
		t.Fatalf("after the new attempts: %s %s, %+v", j.State, j.Outcome, j.Tasks)
	}
	// Nothing failed is left to run again.
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: id, Declaration: raw}, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("a rerun of an array with no failed task: %v", err)
	}
}

// TestRerunChosenTasks: --indices runs the tasks named, however they
// ended, and a task named alone is its array's with that index; --image
// and --input change the array's own declaration; the declaration of
// another array size, an index not in the array, and a task not ended are
// refused before anything is announced, naming the problem.
func TestRerunChosenTasks(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	h.s.d.Images = cidImages{} // before any job: read by every part
	id := h.submitArray(t, 4, []string{"run"}, map[int]ledger.Outcome{1: ledger.OutcomeWithdrawn, 3: ledger.OutcomeFailed})
	img := "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"

	refused := []struct {
		name string
		req  api.SubmitRequest
		want string
		is   error
	}{
		{"another size", api.SubmitRequest{ResumeOf: id, Declaration: arrayOf(t, 5)}, "array of 5 tasks, the array run again has 4", ErrInvalid},
		{"no such index", api.SubmitRequest{ResumeOf: id, Tasks: []int{0, 9}}, "no task 9", ErrInvalid},
		{"both kinds of work", api.SubmitRequest{ResumeOf: id, Declaration: arrayOf(t, 4), Image: img}, "not both", ErrInvalid},
		{"indices of a task", api.SubmitRequest{ResumeOf: market.TaskID(id, 0), Tasks: []int{1}}, "is a task", ErrInvalid},
	}
	before := h.gossip.rawCount()
	for _, c := range refused {
		if _, err := h.s.Submit(ctx, c.req, nil); !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := h.s.jobs.get(market.TaskID(id, 2)).update(func(r *Record) error { r.State = api.JobRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: id, Tasks: []int{0, 2}}, nil); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "task 2 of array "+id+" is still running") {
		t.Errorf("a task still running: %v", err)
	}
	if got := h.gossip.rawCount(); got != before {
		t.Fatalf("%d declarations announced by refused reruns", got-before)
	}

	// The tasks named, in another image with an input added; a completed
	// one and a withdrawn one alike.
	in := market.Input{Source: img, Mount: "/fix"}
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: id, Tasks: []int{1, 0}, Image: img, Data: []market.Input{in}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		tj := h.job(t, market.TaskID(id, i))
		if len(tj.Attempts) != 2 || h.job(t, market.TaskID(id, 2)).State != api.JobRunning {
			t.Fatalf("task %d: %d attempts", i, len(tj.Attempts))
		}
		d := h.storedDeclaration(t, tj.Attempts[1].ID)
		if d.Work.Image != img || len(d.Data) != 1 || d.Data[0].Mount != "/fix" || !slices.Equal(d.Work.Command, []string{"run"}) {
			t.Fatalf("task %d's new attempt: image %q, data %+v, command %v", i, d.Work.Image, d.Data, d.Work.Command)
		}
	}
	// A task named alone, as it was signed.
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: market.TaskID(id, 3), Tasks: nil, FromStart: true}, nil); err != nil {
		t.Fatal(err)
	}
	if tj := h.job(t, market.TaskID(id, 3)); len(tj.Attempts) != 2 || len(h.job(t, market.TaskID(id, 2)).Attempts) != 1 {
		t.Fatalf("task 3 named alone: %d attempts", len(tj.Attempts))
	}
	// A job that is no array takes new work too, and no indices.
	plain := market.NewDeclaration("plain", []string{"old"}, 1, market.Hour, nil)
	h.endedJob(t, "plainjob", plain, "")
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "plainjob", Tasks: []int{0}}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not an array") {
		t.Errorf("--indices of a job: %v", err)
	}
	if _, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "plainjob", Declaration: arrayOf(t, 3)}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is no array") {
		t.Errorf("an array as a job's new work: %v", err)
	}
	fixed := market.NewDeclaration("plain", []string{"new"}, 1, market.Hour, nil)
	raw, _ := json.Marshal(fixed)
	j, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "plainjob", Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := h.storedDeclaration(t, lastAttempt(j)); j.ID != "plainjob" || !slices.Equal(d.Work.Command, []string{"new"}) {
		t.Fatalf("the job's new attempt: %s runs %v", j.ID, d.Work.Command)
	}
}

// TestNextWorkGoesOnFromTheCheckpoint: new work that declares
// checkpoints starts from the attempt's last, at its own checkpoint path;
// from the beginning with fromStart, or where it declares none.
func TestNextWorkGoesOnFromTheCheckpoint(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	d := market.NewDeclaration("ck", []string{"old"}, 1, market.Hour, nil)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute}
	ckpt := "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	h.endedJob(t, "ckjob", d, ckpt)
	work := market.NewDeclaration("ck", []string{"new"}, 1, market.Hour, nil)
	work.Output.Checkpoints = &market.Checkpoints{Path: "/state", Every: 10 * market.Minute}
	j := h.s.jobs.get("ckjob")
	got, err := nextWork(j, work, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Output.Checkpoints.From != ckpt || got.Work.Env["E31_RESUME_FROM"] != "/state" || work.Output.Checkpoints.From != "" {
		t.Fatalf("from the checkpoint: from %q, env %v; the work given: %q", got.Output.Checkpoints.From, got.Work.Env, work.Output.Checkpoints.From)
	}
	for _, c := range []struct {
		fromStart bool
		work      market.Declaration
	}{{true, work}, {false, market.NewDeclaration("ck", []string{"new"}, 1, market.Hour, nil)}} {
		got, err := nextWork(j, c.work, c.fromStart)
		if err != nil {
			t.Fatal(err)
		}
		if cp := got.Output.Checkpoints; (cp != nil && cp.From != "") || got.Work.Env["E31_RESUME_FROM"] != "" {
			t.Fatalf("fromStart %v: %+v, env %v", c.fromStart, cp, got.Work.Env)
		}
	}
}

// arrayOf is the raw declaration of an array of n tasks.
func arrayOf(t *testing.T, n int) json.RawMessage {
	t.Helper()
	d := market.NewDeclaration("sweep", []string{"run"}, 1, market.Hour, nil)
	d.Array = &market.Array{Count: n}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// cidImages imports an image named by its CID alone, as the content
// store would one it holds.
type cidImages struct{}

func (cidImages) Import(_ context.Context, ref string, _ content.Progress) (image.Record, error) {
	c, err := cid.Decode(ref)
	if err != nil {
		return image.Record{}, image.ErrBadRef
	}
	return image.Record{CID: c, Ref: ref, Size: 1}, nil
}

// TestNullDeclarationIsAPlainResume: a resume request whose declaration is
// JSON null, as a client that sends no new work writes it, asks for no
// rework; one with a declaration, tasks or an image does.
func TestNullDeclarationIsAPlainResume(t *testing.T) {
	for _, tc := range []struct {
		req  api.SubmitRequest
		want bool
	}{
		{api.SubmitRequest{ResumeOf: "j"}, false},
		{api.SubmitRequest{ResumeOf: "j", Declaration: json.RawMessage("null")}, false},
		{api.SubmitRequest{ResumeOf: "j", Declaration: json.RawMessage(" null\n")}, false},
		{api.SubmitRequest{ResumeOf: "j", Declaration: json.RawMessage(`{"name":"x"}`)}, true},
		{api.SubmitRequest{ResumeOf: "j", Tasks: []int{2}}, true},
		{api.SubmitRequest{ResumeOf: "j", Image: "docker-archive:x.tar"}, true},
	} {
		if got := reworkAsked(tc.req); got != tc.want {
			t.Errorf("reworkAsked(declaration %q, tasks %v, image %q) = %v, want %v", tc.req.Declaration, tc.req.Tasks, tc.req.Image, got, tc.want)
		}
	}
}
