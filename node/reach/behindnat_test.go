package reach

import (
	"bytes"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A host listening on a specific address is behind a NAT exactly when
// that address is private or loopback; any public one says it is not.
func TestBehindNAT(t *testing.T) {
	for _, c := range []struct {
		listen []string
		want   bool
	}{
		{[]string{"/ip4/192.168.1.20/tcp/4001"}, true},
		{[]string{"/ip4/10.0.0.5/udp/4001/quic-v1", "/ip4/127.0.0.1/tcp/4001"}, true},
		{[]string{"/ip4/192.168.1.20/tcp/4001", "/ip4/203.0.114.7/tcp/4001"}, false},
		{[]string{"/ip6/2001:4860::8888/tcp/4001"}, false},
		{[]string{"/ip6/fd00::1/tcp/4001"}, true},
	} {
		got, err := BehindNAT(c.listen)
		if err != nil {
			t.Fatalf("%v: %v", c.listen, err)
		}
		if got != c.want {
			t.Errorf("BehindNAT(%v) = %v, want %v", c.listen, got, c.want)
		}
	}
	if _, err := BehindNAT([]string{"not an address"}); err == nil {
		t.Error("BehindNAT took a listen address that is not one")
	}
}

// A peer learnt of is also reachable through each of this node's relays,
// but a relay is never dialled through itself, nor this node through
// anyone.
func TestViaRelays(t *testing.T) {
	relay, self, other := mustID(t, 1), mustID(t, 2), mustID(t, 3)
	b := &Book{Self: self, Relays: []peer.AddrInfo{{ID: relay, Addrs: []ma.Multiaddr{
		ma.StringCast("/ip4/10.31.0.1/tcp/4001"), ma.StringCast("/ip4/10.31.0.1/udp/4001/quic-v1"),
	}}}}
	got := b.viaRelays(other)
	want := []string{
		"/ip4/10.31.0.1/tcp/4001/p2p/" + relay.String() + "/p2p-circuit",
		"/ip4/10.31.0.1/udp/4001/quic-v1/p2p/" + relay.String() + "/p2p-circuit",
	}
	if len(got) != len(want) {
		t.Fatalf("via relays: %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("via relays: %v, want %v", got, want)
		}
	}
	if got := b.viaRelays(relay); len(got) != 0 {
		t.Fatalf("the relay through itself: %v", got)
	}
	b.Self = relay
	if got := b.viaRelays(other); len(got) != 0 {
		t.Fatalf("a relay through itself to others: %v", got)
	}
}

func mustID(t *testing.T, seed byte) peer.ID {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
