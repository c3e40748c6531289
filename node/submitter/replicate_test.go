package submitter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
)

// A job with verify.replicas is submitted with its other replica at once:
// the same work, linked both ways, shown within the job and never listed
// beside it; the verify section is the submitter's alone.
func TestReplicasSubmittedWithTheJob(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	d := market.NewDeclaration("train", []string{"true"}, 1, market.Hour, nil)
	d.Verify = &market.Verify{Replicas: 2}
	j, err := h.submitDecl(t, d)
	if err != nil {
		t.Fatal(err)
	}
	if j.Verification == nil || len(j.Verification.Replicas) != 2 || j.Verification.State != "checking" {
		t.Fatalf("the job's verification: %+v, want 2 replicas being checked", j.Verification)
	}
	head := h.s.jobs.get(j.ID).snapshot()
	if len(head.Replicas) != 1 || head.Verify == nil || head.Declaration.Verify != nil {
		t.Fatalf("head record: replicas %v, verify %+v, signed verify %+v", head.Replicas, head.Verify, head.Declaration.Verify)
	}
	rep := h.s.jobs.get(head.Replicas[0]).snapshot()
	if rep.ReplicaOf != j.ID || rep.Declaration.Verify != nil || rep.Verify != nil {
		t.Fatalf("replica record: of %q, verify %+v", rep.ReplicaOf, rep.Declaration.Verify)
	}
	if rep.Declaration.Work.Command[0] != head.Declaration.Work.Command[0] || rep.ID == head.ID {
		t.Fatalf("the replica runs %v as %s, the job %v as %s", rep.Declaration.Work.Command, rep.ID, head.Declaration.Work.Command, head.ID)
	}
	jobs := h.s.Jobs()
	if len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("listed %d jobs, want the job alone", len(jobs))
	}

	held := market.NewDeclaration("after", []string{"true"}, 1, market.Hour, nil)
	held.After = []string{j.ID}
	held.Verify = &market.Verify{Replicas: 2}
	if _, err := h.submitDecl(t, held); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not run as replicas yet") {
		t.Fatalf("a held job with replicas: %v, want a clear refusal", err)
	}
}
