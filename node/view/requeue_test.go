package view

import (
	"errors"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
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
	if v.KnownDeclaration(decl.Raw, sub.ID) {
		t.Fatal("a declaration not yet in the view counts as known")
	}
	v.AddJob(&OpenJob{ID: wire.JobID(decl), Submitter: sub.ID, Body: db, Seen: time.Now(), Hash: decl.Hash()})
	if !v.KnownDeclaration(decl.Raw, sub.ID) {
		t.Fatal("the declaration in the view does not count as known")
	}
	if v.KnownDeclaration(decl.Raw, stranger.ID) {
		t.Fatal("the declaration counts as known from a stranger")
	}

	requeue := func(by wiretest.Party, raws ...[]byte) error {
		return v.ValidateJobMessage(wiretest.OnWire(t, by, wire.KindRequeue, wire.RequeueBody{Declarations: raws}))
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
