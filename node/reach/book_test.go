package reach

import (
	"testing"
	"time"

	"github.com/e31network/e31/node/wire/wiretest"
)

// A provider's record is written when first seen, when its addresses
// change, and once it ages; a provider that leaves the view and comes
// back, unchanged, is not written again.
func TestSavedPeersDue(t *testing.T) {
	s := Saved{}
	p, q := wiretest.FreshParty(t).ID, wiretest.FreshParty(t).ID
	a := []string{"/ip4/127.0.0.1/tcp/4001"}
	b := []string{"/ip4/127.0.0.1/tcp/4002"}
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		what  string
		p     bool // q if false
		addrs []string
		at    time.Duration
		want  bool
	}{
		{"first seen", true, a, 0, true},
		{"another provider", false, a, 0, true},
		{"back unchanged", true, a, time.Second, false},
		{"back unchanged, later", true, a, saveEvery, false},
		{"new addresses", true, b, saveEvery, true},
		{"back unchanged after that", true, b, saveEvery + time.Minute, false},
		{"aged", true, b, 2*saveEvery + time.Second, true},
	}
	for _, st := range steps {
		who := q
		if st.p {
			who = p
		}
		if got := s.Due(who, st.addrs, t0.Add(st.at)); got != st.want {
			t.Fatalf("%s: due = %v, want %v", st.what, got, st.want)
		}
	}
}
