package view

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A requeue may skip verifying declarations this node already holds, byte
// for byte and from the same submitter, and only those: a stranger's
// requeue of them is forged, and altered bytes are verified and refused.
func TestRequeueOfKnownDeclarations(t *testing.T) {
	sub, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "input")))
	var db wire.DeclarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	if knownDeclaration(v, decl.Raw, sub.ID) {
		t.Fatal("a declaration not yet in the view counts as known")
	}
	v.AddJob(&OpenJob{ID: wire.JobID(decl), Submitter: sub.ID, Body: db, Seen: time.Now(), Hash: decl.Hash()})
	if !knownDeclaration(v, decl.Raw, sub.ID) {
		t.Fatal("the declaration in the view does not count as known")
	}
	if knownDeclaration(v, decl.Raw, stranger.ID) {
		t.Fatal("the declaration counts as known from a stranger")
	}

	requeue := func(by wiretest.Party, raws ...[]byte) error {
		return NewJobChecks(v).Validate(wiretest.OnWire(t, by, wire.KindRequeue, wire.RequeueBody{Declarations: raws}))
	}
	if err := requeue(sub, decl.Raw); err != nil {
		t.Fatalf("requeue of a known declaration by its submitter: %v", err)
	}
	if err := requeue(stranger, decl.Raw); !errors.Is(err, p2p.ErrForged) {
		t.Fatalf("requeue of a known declaration by a stranger: %v, want forged", err)
	}
	altered := append([]byte(nil), decl.Raw...)
	altered[len(altered)-1] ^= 1 // the signature's last byte
	if err := requeue(sub, altered); err == nil {
		t.Fatal("requeue of an altered declaration accepted")
	}
}

// A requeue's declaration the view holds is only marked re-announced, as
// AddJob would mark it: it keeps the job from going stale, and opens again
// a job its submitter had declined; bytes from another signer, or altered,
// are not taken for it.
func TestReannounced(t *testing.T) {
	sub, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t)
	decl := wiretest.OnWire(t, sub, wire.KindDeclaration, wiretest.Declaration(t, wiretest.CID(t, "input")))
	var db wire.DeclarationBody
	if err := decl.Decode(&db); err != nil {
		t.Fatal(err)
	}
	id := wire.JobID(decl)
	now := time.Now()
	v := NewMarket()
	if known, _ := v.Reannounced(decl.Raw, sub.ID, now); known {
		t.Fatal("a declaration not in the view counts as re-announced")
	}
	v.AddJob(&OpenJob{ID: id, Submitter: sub.ID, Body: db, Seen: now, Hash: decl.Hash()})
	if known, _ := v.Reannounced(decl.Raw, stranger.ID, now); known {
		t.Fatal("a stranger's requeue of the declaration counts as its re-announcement")
	}
	altered := append([]byte(nil), decl.Raw...)
	altered[len(altered)-1] ^= 1
	if known, _ := v.Reannounced(altered, sub.ID, now); known {
		t.Fatal("altered bytes count as the declaration")
	}

	// Not re-announced for longer than stale: pruned, unless re-announced.
	stale := 10 * time.Second
	if known, opened := v.Reannounced(decl.Raw, sub.ID, now.Add(8*time.Second)); !known || opened {
		t.Fatalf("re-announcement of an open job: known %v, opened %v", known, opened)
	}
	v.Prune(now.Add(15*time.Second), time.Hour, stale)
	if _, ok := v.Job(id); !ok {
		t.Fatal("a re-announced job was pruned as stale")
	}

	v.Decline(id, sub.ID, now.Add(16*time.Second))
	if _, ok := v.Job(id); ok {
		t.Fatal("declined job still open")
	}
	if known, opened := v.Reannounced(decl.Raw, sub.ID, now.Add(17*time.Second)); !known || !opened {
		t.Fatalf("re-announcement after a refusal: known %v, opened %v", known, opened)
	}
	if _, ok := v.Job(id); !ok || v.OpenCount() != 1 {
		t.Fatalf("declined job not open again after its re-announcement (open %d)", v.OpenCount())
	}
}

// An array held in the view is known by its declaration, as a single job
// is: its requeues are not verified again, its tasks each a job though
// they are.
func TestRequeueOfAKnownArray(t *testing.T) {
	sub, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	raw, a := arrayOnWire(t, sub, 5, 0, time.Now())
	if knownDeclaration(v, raw, sub.ID) {
		t.Fatal("an array not yet in the view counts as known")
	}
	v.AddJob(a)
	if !knownDeclaration(v, raw, sub.ID) || knownDeclaration(v, raw, stranger.ID) {
		t.Fatal("the array in the view is not known as its submitter's alone")
	}
}

// knownDeclaration reports whether v holds raw, byte for byte, as a
// declaration by signer (JobChecks.knownLocked).
func knownDeclaration(v *Market, raw []byte, signer peer.ID) bool {
	h := sha256.Sum256(raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	return NewJobChecks(v).knownLocked(h, signer)
}
