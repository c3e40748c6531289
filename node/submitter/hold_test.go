package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
)

// submitDecl submits d as a declaration through the API's path.
func (h *harness) submitDecl(t *testing.T, d market.Declaration) (api.Job, error) {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
}

// end sets how a job's record ended.
func (h *harness) end(t *testing.T, id string, outcome ledger.Outcome, attribution ledger.Attribution) {
	t.Helper()
	if err := h.s.jobs.get(id).update(func(r *Record) error {
		r.State = api.JobReleased
		r.Outcome, r.Attribution, r.Reason = outcome, attribution, "as the test says"
		if outcome == ledger.OutcomeCompleted {
			r.Output = wiretest.CID(t, "output of "+id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A job that names upstreams is held on this node, unannounced, until
// they end as it asks: released, it is announced as its first attempt
// under the ID it was submitted with; an after upstream that fails ends
// it failed, with nothing run; withdrawn while held, nothing is
// announced.
func TestHeldUntilUpstreams(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	decl := func(name string, after, afterAny []string) market.Declaration {
		d := market.NewDeclaration(name, []string{"true"}, 1, market.Hour, nil)
		d.After, d.AfterAny = after, afterAny
		return d
	}
	up, err := h.submitDecl(t, decl("prepare", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	announced := h.gossip.rawCount()
	dep, err := h.submitDecl(t, decl("train", []string{up.ID[:6]}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if dep.ID == up.ID || dep.State != api.JobQueued || !strings.Contains(dep.Reason, "held until its upstreams end: "+up.ID+" (queued)") {
		t.Fatalf("held job: %s %s %q", dep.ID, dep.State, dep.Reason)
	}
	if n := h.gossip.rawCount(); n != announced {
		t.Fatalf("a held job was announced (%d announcements, was %d)", n, announced)
	}
	depT := h.s.jobs.get(dep.ID)
	heldOf(h.s.kit, depT).release(ctx)
	if j := h.job(t, dep.ID); len(j.Attempts) != 0 || j.State != api.JobQueued {
		t.Fatalf("released while its upstream is queued: %s, %d attempts", j.State, len(j.Attempts))
	}
	if err := h.s.Logs(ctx, dep.ID, api.LogOptions{}, &strings.Builder{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "held until") {
		t.Fatalf("logs of a held job: %v", err)
	}
	if _, _, err := h.s.Output(dep.ID, false, 0); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "held until") {
		t.Fatalf("output of a held job: %v", err)
	}
	for _, a := range h.s.Attempts() {
		if a.ID == dep.ID {
			t.Fatal("a held job is listed among the attempts")
		}
	}

	h.end(t, up.ID, ledger.OutcomeCompleted, ledger.AttributionJob)
	heldOf(h.s.kit, depT).release(ctx)
	j := h.job(t, dep.ID)
	if j.ID != dep.ID || j.Name != "train" || len(j.Attempts) != 1 || j.Attempts[0].ID == dep.ID || j.State != api.JobQueued {
		t.Fatalf("released: %s %q %s with attempts %+v", j.ID, j.Name, j.State, j.Attempts)
	}
	if n := h.gossip.rawCount(); n != announced+1 {
		t.Fatalf("released, %d announcements, want %d", n, announced+1)
	}
	first := h.job(t, j.Attempts[0].ID)
	if first.Root != dep.ID || first.ResumeOf != dep.ID {
		t.Fatalf("the first attempt: root %q, resume of %q", first.Root, first.ResumeOf)
	}
	heldOf(h.s.kit, depT).release(ctx) // released once
	if n := h.gossip.rawCount(); n != announced+1 {
		t.Fatalf("released twice: %d announcements", n)
	}

	// An after upstream that fails ends the job failed, as it attributes.
	up2, err := h.submitDecl(t, decl("prepare2", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	dep2, err := h.submitDecl(t, decl("train2", []string{up2.ID}, nil))
	if err != nil {
		t.Fatal(err)
	}
	anyDep, err := h.submitDecl(t, decl("report", nil, []string{up2.ID}))
	if err != nil {
		t.Fatal(err)
	}
	h.end(t, up2.ID, ledger.OutcomeFailed, ledger.AttributionJob)
	heldOf(h.s.kit, h.s.jobs.get(dep2.ID)).release(ctx)
	heldOf(h.s.kit, h.s.jobs.get(anyDep.ID)).release(ctx)
	j = h.job(t, dep2.ID)
	if !j.State.Terminal() || j.Outcome != string(ledger.OutcomeFailed) || j.Attribution != string(ledger.AttributionJob) ||
		!strings.Contains(j.Reason, "upstream "+up2.ID+" ended failed") || len(j.Attempts) != 0 {
		t.Fatalf("after a failed upstream: %s %s/%s %q, %d attempts", j.State, j.Outcome, j.Attribution, j.Reason, len(j.Attempts))
	}
	if j := h.job(t, anyDep.ID); len(j.Attempts) != 1 {
		t.Fatalf("after_any a failed upstream: %s, %d attempts, want it released", j.State, len(j.Attempts))
	}

	// Withdrawn while held: nothing goes out, and it is never released.
	up3, err := h.submitDecl(t, decl("prepare3", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	dep3, err := h.submitDecl(t, decl("train3", []string{up3.ID}, nil))
	if err != nil {
		t.Fatal(err)
	}
	withdrawals := h.gossip.count(wire.KindWithdrawal)
	if w, err := h.s.Withdraw(ctx, dep3.ID); err != nil || w.State != api.JobWithdrawn {
		t.Fatalf("withdraw a held job: %+v, %v", w, err)
	}
	if n := h.gossip.count(wire.KindWithdrawal); n != withdrawals {
		t.Fatalf("the withdrawal of a job the network never heard of was announced")
	}
	h.end(t, up3.ID, ledger.OutcomeCompleted, ledger.AttributionJob)
	heldOf(h.s.kit, h.s.jobs.get(dep3.ID)).release(ctx)
	if j := h.job(t, dep3.ID); j.State != api.JobWithdrawn || len(j.Attempts) != 0 {
		t.Fatalf("a withdrawn held job was released: %s, %d attempts", j.State, len(j.Attempts))
	}

	// An upstream this node does not know is refused at submit.
	if _, err := h.submitDecl(t, decl("orphan", []string{"nosuchjob"}, nil)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "after[0] nosuchjob") {
		t.Fatalf("an unknown upstream: %v", err)
	}
}

// A held job waits for an upstream that completed but whose output has
// not reached this node yet; one that ended after a failed upstream is not
// "retried", even when it declares retries, at a restart.
func TestHeldJobEdges(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	up, err := h.submitDecl(t, market.NewDeclaration("prepare", []string{"true"}, 1, market.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("train", []string{"true"}, 1, market.Hour, nil)
	d.After = []string{up.ID}
	d.Request.Retries = 2
	dep, err := h.submitDecl(t, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.jobs.get(up.ID).update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeCompleted, ledger.AttributionJob
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	heldOf(h.s.kit, h.s.jobs.get(dep.ID)).release(ctx)
	if j := h.job(t, dep.ID); j.State != api.JobQueued || len(j.Attempts) != 0 {
		t.Fatalf("released before its upstream's output came: %s, %d attempts", j.State, len(j.Attempts))
	}

	up2, err := h.submitDecl(t, market.NewDeclaration("prepare2", []string{"true"}, 1, market.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	d.After = []string{up2.ID}
	dep2, err := h.submitDecl(t, d)
	if err != nil {
		t.Fatal(err)
	}
	h.end(t, up2.ID, ledger.OutcomeFailed, ledger.AttributionJob)
	heldOf(h.s.kit, h.s.jobs.get(dep2.ID)).release(ctx)
	announced := h.gossip.rawCount()
	h.s.resumeDueAtStart(ctx)
	h.s.autoResume(ctx, dep2.ID)
	if j := h.job(t, dep2.ID); !j.State.Terminal() || len(j.Attempts) != 0 || h.gossip.rawCount() != announced {
		t.Fatalf("a job after a failed upstream ran: %s, %d attempts", j.State, len(j.Attempts))
	}
}

// A job whose upstreams have all completed already is submitted at once.
func TestAfterCompletedUpstreamSubmitsAtOnce(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	up, err := h.submitDecl(t, market.NewDeclaration("prepare", []string{"true"}, 1, market.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	h.end(t, up.ID, ledger.OutcomeCompleted, ledger.AttributionJob)
	d := market.NewDeclaration("train", []string{"true"}, 1, market.Hour, nil)
	d.After = []string{up.ID}
	j, err := h.submitDecl(t, d)
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	h.s.jobs.get(j.ID).view(func(r *Record) { rec = r.copy() })
	if rec.placeholder() || rec.Envelope == nil {
		t.Fatalf("a job after a completed upstream was held: %+v", rec.Hold)
	}
}
