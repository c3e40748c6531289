package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
)

// The checks of the jobs topic that need the view: a withdrawal counts only
// from the job's submitter, a release only from a party to its lease, and a
// requeue only with the wrapper's own declarations.
func TestJobMessagesCheckedAgainstTheView(t *testing.T) {
	sub, prov, stranger := freshParty(t), freshParty(t), freshParty(t)
	n := &Node{view: newMarketView()}
	now := time.Now()

	decl := onWire(t, sub, kindDeclaration, testDeclaration(t, testCID(t, "input")))
	if err := n.validateJobMessage(decl); err != nil {
		t.Fatal(err)
	}
	var db declarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	id := jobID(decl)
	n.view.addJob(&openJob{id: id, submitter: sub.id, body: db, raw: decl.Raw, seen: now})

	forged := onWire(t, stranger, kindWithdrawal, withdrawalBody{Job: id})
	if err := n.validateJobMessage(forged); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("withdrawal by a stranger: %v, want forged", err)
	}
	if err := n.validateJobMessage(onWire(t, sub, kindWithdrawal, withdrawalBody{Job: id})); err != nil {
		t.Fatalf("withdrawal by the submitter: %v", err)
	}

	l := signedLease(t, prov, sub)
	n.view.addLease(l, now)
	r := testRelease(prov.id, sub.id)
	r.Lease = l.Terms.ID
	if err := n.validateJobMessage(onWire(t, prov, kindRelease, r)); err != nil {
		t.Fatalf("release by the provider: %v", err)
	}
	// A stranger naming itself as the submitter of someone else's lease.
	r2 := r
	r2.Submitter = stranger.id.String()
	if err := n.validateJobMessage(onWire(t, stranger, kindRelease, r2)); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("release by a stranger: %v, want forged", err)
	}

	// A requeue must carry only its signer's declarations.
	if err := n.validateJobMessage(onWire(t, sub, kindRequeue, requeueBody{Declarations: [][]byte{decl.Raw}})); err != nil {
		t.Fatalf("requeue by the submitter: %v", err)
	}
	if err := n.validateJobMessage(onWire(t, stranger, kindRequeue, requeueBody{Declarations: [][]byte{decl.Raw}})); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("requeue of another's declaration: %v, want forged", err)
	}
}

// An early release by strangers does not end a lease announced later.
func TestEarlyReleaseMustNameTheParties(t *testing.T) {
	sub, prov, stranger := freshParty(t), freshParty(t), freshParty(t)
	v := newMarketView()
	now := time.Now()
	l := signedLease(t, prov, sub)
	r := testRelease(stranger.id, sub.id)
	r.Lease = l.Terms.ID
	v.releaseLease(r, stranger.id, now)
	v.addLease(l, now)
	mv := v.snapshot(1, now.Add(time.Second), now.Add(time.Second), nil)
	if len(mv.Leases) != 1 {
		t.Fatalf("lease released by a stranger's early release: %d live", len(mv.Leases))
	}
}

// One submitter cannot make a view hold more than its share of open jobs,
// and closing or expiring jobs frees room.
func TestOpenJobsPerSubmitterBounded(t *testing.T) {
	sub := freshParty(t)
	v := newMarketView()
	now := time.Now()
	for i := 0; i < maxOpenJobsPerSubmitter; i++ {
		if !v.addJob(&openJob{id: fmt.Sprint("j", i), submitter: sub.id, seen: now}) {
			t.Fatalf("job %d refused under the bound", i)
		}
	}
	if v.addJob(&openJob{id: "over", submitter: sub.id, seen: now}) {
		t.Fatal("a job over the bound was accepted")
	}
	v.closeJob("j0", sub.id, now)
	if !v.addJob(&openJob{id: "over", submitter: sub.id, seen: now}) {
		t.Fatal("closing a job did not free room")
	}
	v.prune(now.Add(time.Hour), time.Hour, time.Minute)
	if len(v.open) != 0 {
		t.Fatalf("expired jobs still counted: %v", v.open)
	}
}
