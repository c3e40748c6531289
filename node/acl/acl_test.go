package acl

import (
	"testing"

	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
)

func TestAllowIsPerPeerAndRoot(t *testing.T) {
	a, b := wiretest.FreshParty(t).ID, wiretest.FreshParty(t).ID
	r1, _ := cid.Decode(wiretest.CID(t, "one"))
	r2, _ := cid.Decode(wiretest.CID(t, "two"))
	l := New()
	if l.Allowed(a, r1) {
		t.Fatal("an empty list allows a fetch")
	}
	l.Allow(a, r1)
	if !l.Allowed(a, r1) || l.Allowed(b, r1) || l.Allowed(a, r2) {
		t.Fatalf("after Allow(a, r1): a/r1 %t, b/r1 %t, a/r2 %t", l.Allowed(a, r1), l.Allowed(b, r1), l.Allowed(a, r2))
	}
	l.Forget(r1)
	if l.Allowed(a, r1) {
		t.Fatal("a forgotten root is still allowed")
	}
}
