package submitter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire/wiretest"
)

// lostAuto stores a job lost with its provider whose declaration asks to
// be resumed automatically, with checkpoint as its last, and loads it.
func (h *harness) lostAuto(t *testing.T, id, checkpoint string) {
	t.Helper()
	d := market.NewDeclaration("train", []string{"python3", "/code/train.py"}, 1, market.Hour, nil)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: 2}
	h.endedJob(t, id, d, checkpoint)
}

// A job lost with its provider and due to be resumed is shown queued, not
// ended; a follower waiting on it hears of the resumption under the ID the
// job was submitted with, and the job then ends as its last attempt does.
func TestFollowAcrossResumption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
		ctx := context.Background()
		cp := wiretest.CID(t, "checkpoint")
		h.lostAuto(t, "lostjob", cp)

		j := h.job(t, "lostjob")
		if j.State != api.JobQueued || j.State.Terminal() || !strings.Contains(j.Reason, "resuming") || !strings.Contains(j.Reason, cp) {
			t.Fatalf("a job due to be resumed: %s, %q", j.State, j.Reason)
		}
		if _, _, err := h.s.Output("lostjob", false, 0); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "resuming") {
			t.Fatalf("output of a job being resumed: %v", err)
		}

		got := make(chan api.Job, 1)
		go func() {
			next, err := h.s.WaitJob(ctx, "lostjob", j.Version)
			if err != nil {
				t.Error(err)
			}
			got <- next
		}()
		synctest.Wait()
		select {
		case n := <-got:
			t.Fatalf("the follower woke before anything changed: %+v", n)
		default:
		}

		h.s.resumeAttempt(ctx, "lostjob")
		n := <-got
		if n.ID != "lostjob" || len(n.Attempts) != 2 || n.State != api.JobQueued || n.Version == j.Version {
			t.Fatalf("after the resumption the follower sees %s with %d attempts (version %d, was %d)", n.State, len(n.Attempts), n.Version, j.Version)
		}
		second := n.Attempts[1]
		if second.StartedFrom != cp || n.Attempts[0].Outcome != "provider-lost" || n.Checkpoint != cp {
			t.Fatalf("attempts %+v, checkpoint %q", n.Attempts, n.Checkpoint)
		}
		// Resumed once: a second call (a final receipt and the watch both
		// saw the loss) submits nothing.
		h.s.resumeAttempt(ctx, "lostjob")
		if j := h.job(t, "lostjob"); len(j.Attempts) != 2 {
			t.Fatalf("resumed twice: %d attempts", len(j.Attempts))
		}
		if jobs := h.s.Jobs(); len(jobs) != 1 || jobs[0].ID != "lostjob" {
			t.Fatalf("the list shows %d jobs", len(jobs))
		}

		// Withdrawn under its first ID, the job's last attempt is.
		w, err := h.s.Withdraw(ctx, "lostjob")
		if err != nil {
			t.Fatal(err)
		}
		if w.ID != "lostjob" || w.State != api.JobWithdrawn || !w.State.Terminal() {
			t.Fatalf("withdrawn: %s %s", w.ID, w.State)
		}
		if own := h.job(t, second.ID); own.State != api.JobWithdrawn || own.Root != "lostjob" {
			t.Fatalf("the second attempt: %s, root %q", own.State, own.Root)
		}
	})
}

// Withdrawing a job between its provider's loss and its resumption ends it
// there: it is not resumed after.
func TestWithdrawStopsAResumption(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	h.lostAuto(t, "lostjob", "")
	w, err := h.s.Withdraw(ctx, "lostjob")
	if err != nil {
		t.Fatal(err)
	}
	if !w.State.Terminal() || !strings.Contains(w.Reason, "withdrawn before it was resumed") {
		t.Fatalf("withdrawn before its resumption: %s, %q", w.State, w.Reason)
	}
	h.s.resumeAttempt(ctx, "lostjob")
	if j := h.job(t, "lostjob"); len(j.Attempts) != 1 || !j.State.Terminal() {
		t.Fatalf("resumed after it was withdrawn: %d attempts, %s", len(j.Attempts), j.State)
	}
}

// A job resumed by hand is resumed as its last attempt, from the last
// checkpoint any attempt took, and keeps its ID.
func TestResumeByHandKeepsTheJob(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	d := market.NewDeclaration("train", []string{"python3", "/code/train.py"}, 1, market.Hour, nil)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute}
	cp := wiretest.CID(t, "checkpoint")
	h.endedJob(t, "failedjob", d, cp)
	j, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "failedjob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "failedjob" || len(j.Attempts) != 2 || j.Attempts[1].StartedFrom != cp {
		t.Fatalf("resumed: %s with attempts %+v", j.ID, j.Attempts)
	}
	// The second attempt is lost before a checkpoint of its own: resumed
	// again, it starts from the same one.
	second := j.Attempts[1].ID
	if err := h.s.jobs.get(second).update(func(r *Record) error {
		r.State = api.JobReleased
		r.Outcome = "provider-lost"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j, err = h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "failedjob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 3 || j.Attempts[2].StartedFrom != cp || h.storedDeclaration(t, j.Attempts[2].ID).Output.Checkpoints.From != cp {
		t.Fatalf("resumed again: %+v", j.Attempts)
	}
	if _, c, err := h.s.Output("failedjob", true, 0); err != nil || c.String() != cp {
		t.Fatalf("the job's last checkpoint: %v, %v", c, err)
	}
	// One attempt, by its number: the first took the checkpoint, the
	// second none; there is no fourth.
	if _, c, err := h.s.Output("failedjob", true, 1); err != nil || c.String() != cp {
		t.Fatalf("the first attempt's checkpoint: %v, %v", c, err)
	}
	if _, _, err := h.s.Output("failedjob", true, 2); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "no checkpoint in attempt 2") {
		t.Fatalf("the checkpoint of an attempt that took none: %v", err)
	}
	if _, _, err := h.s.Output("failedjob", false, 4); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no attempt 4 (it has 3)") {
		t.Fatalf("an attempt past the last: %v", err)
	}
}

// The chains of attempts a previous run left half-written are mended: a
// parent that does not name its resumption, an attempt that does not name
// its job.
func TestLinkAttempts(t *testing.T) {
	first := &Record{ID: "a"}
	second := &Record{ID: "b", RecordChain: RecordChain{ResumeOf: "a"}}
	third := &Record{ID: "c", RecordChain: RecordChain{ResumeOf: "b", Root: "a"}}
	other := &Record{ID: "x"}
	changed := linkAttempts([]*Record{third, other, second, first})
	if first.Next != "b" || second.Next != "c" || second.Root != "a" || third.Next != "" {
		t.Fatalf("linked: a→%q b→%q (root %q) c→%q", first.Next, second.Next, second.Root, third.Next)
	}
	if len(changed) != 2 {
		t.Fatalf("%d records to write, want 2 (a and b)", len(changed))
	}
	if changed := linkAttempts([]*Record{third, other, second, first}); len(changed) != 0 {
		t.Fatalf("linked again: %d records changed", len(changed))
	}
}

// A job lost with its provider whose resumption a stopped daemon did not
// submit is resumed at the next start.
func TestResumeDueAtStart(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	h.lostAuto(t, "lostjob", "")
	h.s.resumeDueAtStart(context.Background())
	j := h.job(t, "lostjob")
	if len(j.Attempts) != 2 || j.Attempts[1].State != api.JobQueued {
		t.Fatalf("after the start: %+v", j.Attempts)
	}
}

// A job that fails by its own fault is run again, as its next attempt, as
// many times as request.retries says, and then ends failed; a failure the
// provider caused is not counted as one.
func TestRetriesAfterOwnFailure(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	d := market.NewDeclaration("sim", []string{"python3", "/code/sim.py"}, 1, market.Hour, nil)
	d.Request.Retries = 2
	h.endedJob(t, "failjob", d, "")
	fail := func(id string, attribution ledger.Attribution) {
		t.Helper()
		if err := h.s.jobs.get(id).update(func(r *Record) error {
			r.State = api.JobReleased
			r.Outcome, r.Attribution, r.Reason = ledger.OutcomeFailed, attribution, "exit status 3"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	fail("failjob", ledger.AttributionJob)

	j := h.job(t, "failjob")
	if j.State != api.JobQueued || !strings.Contains(j.Reason, "retrying: attempt 1 failed (exit status 3); retry 1 of 2 starts from the beginning") {
		t.Fatalf("a failed job with retries left: %s, %q", j.State, j.Reason)
	}
	for retry := 1; retry <= 2; retry++ {
		h.s.autoResume(ctx, j.Attempts[len(j.Attempts)-1].ID)
		j = h.job(t, "failjob")
		if len(j.Attempts) != retry+1 {
			t.Fatalf("after retry %d: %d attempts", retry, len(j.Attempts))
		}
		last := j.Attempts[retry].ID
		var rec Record
		h.s.jobs.get(last).view(func(r *Record) { rec = *r })
		if rec.Retries != retry || rec.Resumes != 0 || rec.Root != "failjob" || rec.Declaration.Request.Retries != 2 {
			t.Fatalf("retry %d: retries %d, resumes %d, root %q", retry, rec.Retries, rec.Resumes, rec.Root)
		}
		fail(last, ledger.AttributionJob)
	}
	// Its retries used up, the job ends as its last attempt did.
	j = h.job(t, "failjob")
	if !j.State.Terminal() || j.Outcome != string(ledger.OutcomeFailed) || len(j.Attempts) != 3 {
		t.Fatalf("retries used up: %s %s with %d attempts", j.State, j.Outcome, len(j.Attempts))
	}
	h.s.autoResume(ctx, j.Attempts[2].ID)
	if j := h.job(t, "failjob"); len(j.Attempts) != 3 {
		t.Fatalf("run again past its retries: %d attempts", len(j.Attempts))
	}

	// The provider's failure is not the job's: no retry.
	h.endedJob(t, "provjob", d, "")
	fail("provjob", ledger.AttributionProvider)
	h.s.autoResume(ctx, "provjob")
	if j := h.job(t, "provjob"); !j.State.Terminal() || len(j.Attempts) > 1 {
		t.Fatalf("a failure the provider caused was retried: %s, %d attempts", j.State, len(j.Attempts))
	}
}
