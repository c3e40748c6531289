package reach

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func TestExplain(t *testing.T) {
	relay := peer.ID("relay-1")
	ports := []string{"tcp/4001", "udp/4001"}
	for _, tc := range []struct {
		name  string
		f     Facts
		state string
		why   string // a part of Why
	}{
		{"off", Facts{Reach: p2p.ReachPrivate}, StateOff, "--nat off"},
		{"public", Facts{Traversal: true, Reach: p2p.ReachPublic, Relays: []peer.ID{relay}}, StatePublic, "directly"},
		{"relayed", Facts{Traversal: true, Reach: p2p.ReachPrivate, Relays: []peer.ID{relay}}, StateRelayed, "relay slot"},
		{"unknown", Facts{Traversal: true}, StateUnknown, "not yet learned"},
		{"no bootstrap", Facts{Traversal: true, Reach: p2p.ReachPrivate, Ports: ports}, StateUnreachable, "no bootstrap peer"},
		{"not connected", Facts{Traversal: true, Reach: p2p.ReachPrivate, Boot: 2}, StateUnreachable, "connected to none of its 2"},
		{"no relay", Facts{Traversal: true, Reach: p2p.ReachPrivate, Boot: 2, BootConnected: 1}, StateUnreachable, "none of the 1 bootstrap peers it is connected to serves as a relay"},
		{"no slot yet", Facts{Traversal: true, Reach: p2p.ReachPrivate, Boot: 1, BootConnected: 1, BootRelays: 1}, StateUnreachable, "has given it a slot yet"},
	} {
		s := Explain(tc.f)
		if s.State != tc.state || !strings.Contains(s.Why, tc.why) {
			t.Errorf("%s: Explain = %+v, want state %s, why with %q", tc.name, s, tc.state, tc.why)
		}
		if (s.State == StateUnreachable) != (s.Fix != "") {
			t.Errorf("%s: fix %q for state %s", tc.name, s.Fix, s.State)
		}
		if s.State == StateRelayed && (len(s.Relays) != 1 || s.Relays[0] != relay.String()) {
			t.Errorf("%s: relays %v, want %s", tc.name, s.Relays, relay)
		}
	}
	s := Explain(Facts{Traversal: true, Reach: p2p.ReachPrivate, Ports: []string{"tcp/4001", "udp/4001"}})
	if want := "no peer can reach this node: it gets no work; "; !strings.HasPrefix(s.Line(), want) || !strings.Contains(s.Fix, "forward tcp/4001 and udp/4001") {
		t.Errorf("line %q, fix %q", s.Line(), s.Fix)
	}
}

func TestListenPorts(t *testing.T) {
	var addrs []ma.Multiaddr
	for _, a := range []string{"/ip4/127.0.0.1/tcp/1", "/ip4/10.0.0.2/tcp/4001", "/ip4/10.0.0.2/udp/4001/quic-v1", "/ip6/::/tcp/4001"} {
		addrs = append(addrs, ma.StringCast(a))
	}
	if got := listenPorts(addrs); strings.Join(got, ",") != "tcp/4001,udp/4001" {
		t.Errorf("listenPorts = %v", got)
	}
	// The host lists its listeners in no set order: the ports read the
	// same whatever it.
	udpFirst := []ma.Multiaddr{ma.StringCast("/ip4/10.0.0.2/udp/4001/quic-v1"), ma.StringCast("/ip4/10.0.0.2/tcp/4001")}
	if got := listenPorts(udpFirst); strings.Join(got, ",") != "tcp/4001,udp/4001" {
		t.Errorf("listenPorts with the UDP listener first = %v", got)
	}
}

// TestTellerSettles: a state is told once it has held for the settle
// time, once, and again only when it changes; unknown is never told.
func TestTellerSettles(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	unreachable := Status{State: StateUnreachable}
	relayed := Status{State: StateRelayed, Relays: []string{"R"}}
	tl := teller{settle: 10 * time.Second}
	steps := []struct {
		s    Status
		at   int
		tell bool
		was  string
	}{
		{Status{State: StateUnknown}, 0, false, ""},
		{unreachable, 1, false, ""},
		{relayed, 3, false, ""}, // the slot came before the settle time
		{relayed, 12, false, ""},
		{relayed, 13, true, ""},
		{relayed, 30, false, ""},
		{Status{State: StateRelayed, Relays: []string{"S"}}, 31, false, ""},
		{Status{State: StateRelayed, Relays: []string{"S"}}, 41, true, StateRelayed},
		{unreachable, 50, false, ""},
		{Status{State: StateUnknown}, 55, false, ""}, // unknown between resets the wait
		{unreachable, 56, false, ""},
		{unreachable, 65, false, ""},
		{unreachable, 66, true, StateRelayed},
		{unreachable, 100, false, ""},
	}
	for i, st := range steps {
		was, tell := tl.observe(st.s, at(st.at))
		if tell != st.tell || was != st.was {
			t.Errorf("step %d (%s at %ds): tell %v was %q, want %v %q", i, st.s.State, st.at, tell, was, st.tell, st.was)
		}
	}
}
