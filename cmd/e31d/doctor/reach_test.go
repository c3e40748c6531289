package doctor

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
)

// bootHost is a loopback host for the check to ask, a relay where relay
// says so.
func bootHost(t *testing.T, relay bool) (host.Host, string) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var r p2p.Reachability
	if relay {
		r = p2p.Reachability{Force: p2p.ReachPublic, RelayService: true}
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: "e31d/test", Reachability: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, h.Addrs()[0].String() + "/p2p/" + h.ID().String()
}

func TestReachCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("starts libp2p hosts")
	}
	_, plain := bootHost(t, false)
	_, relay := bootHost(t, true)
	// Loopback is no public address: the check's host is behind a NAT,
	// as on a home network, and is reached only through a relay.
	listen := []string{"/ip4/127.0.0.1/tcp/0"}
	for _, tc := range []struct {
		name   string
		o      ReachOptions
		status Status
		detail []string
	}{
		{"off", ReachOptions{Listen: listen}, OK, []string{"not checked: NAT traversal is off"}},
		{"no bootstrap", ReachOptions{Listen: listen, NAT: "on"}, Warn, []string{"no peer can reach this node", "no bootstrap peer"}},
		{"no relay", ReachOptions{Listen: listen, NAT: "on", Bootstrap: []string{plain}}, Fail,
			[]string{"unreachable: no peer can reach this node: it gets no work", "none of the 1 bootstrap peers it is connected to serves as a relay", "through 1 bootstrap peers"}},
		{"relay", ReachOptions{Listen: listen, NAT: "on", Bootstrap: []string{plain, relay}}, OK, []string{"relayed: behind a NAT, and 1 bootstrap peers serve as a relay"}},
		{"bad bootstrap", ReachOptions{Listen: listen, NAT: "on", Bootstrap: []string{"/ip4/127.0.0.1/tcp/1"}}, Fail, []string{"bootstrap"}},
	} {
		start := time.Now()
		r := Reach(context.Background(), ReachOptions{Listen: tc.o.Listen, NAT: tc.o.NAT, Bootstrap: tc.o.Bootstrap, Wait: 20 * time.Second})
		t.Logf("%s (%.1fs): %+v", tc.name, time.Since(start).Seconds(), r)
		if r.Name != "reachability" || r.Status != tc.status {
			t.Errorf("%s: %+v, want %s", tc.name, r, tc.status)
		}
		for _, d := range tc.detail {
			if !strings.Contains(r.Detail, d) {
				t.Errorf("%s: detail %q, want it to say %q", tc.name, r.Detail, d)
			}
		}
		if r.Status != OK && r.Fix == "" {
			t.Errorf("%s: no fix", tc.name)
		}
	}
}
