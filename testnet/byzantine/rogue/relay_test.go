package rogue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
)

// nobody is a network of no members: a relay that asks it serves no one.
type nobody struct{}

func (nobody) Member(peer.ID) bool      { return false }
func (nobody) Paired(_, _ peer.ID) bool { return false }
func (nobody) Joined() <-chan struct{}  { return nil }

// openRelay starts a relay on loopback that carries anything for
// anyone (peers nil), or serves peers' members only, and returns its
// address, ending in /p2p/ID.
func openRelay(t *testing.T, peers p2p.RelayPeers) string {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: p2p.Reachability{Force: p2p.ReachPublic, RelayService: true,
			RelayLimits: p2p.RelayLimits{Data: -1, Peers: peers, ReserveWait: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	poll.Until(t, "the relay service to start", 10*time.Second, func() bool { return slices.Contains(r.Mux().Protocols(), proto.ProtoIDv2Hop) })
	return r.Addrs()[0].String() + "/p2p/" + r.ID().String()
}

func relayRogue(t *testing.T, relay string) *Rogue {
	t.Helper()
	r, err := New(context.Background(), Config{Network: "rogue-test", Relays: []string{relay}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Through a relay that carries anything, a rogue reserves, connects to
// another through the relay alone, and what it pushes arrives whole,
// counted where it arrived.
func TestPushThroughARelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relay := openRelay(t, nil)
	a, b := relayRogue(t, relay), relayRogue(t, relay)
	if err := b.ReserveSlot(ctx, relay); err != nil {
		t.Fatalf("b's reservation: %v", err)
	}
	if err := a.Via(ctx, relay, b.ID()); err != nil {
		t.Fatalf("a's circuit to b: %v", err)
	}
	const n = 512 << 10
	got, s, err := a.pushTo(ctx, b, "push", n)
	if err != nil {
		t.Fatal(err)
	}
	if got != n || s.Answer != Accepted || s.Count != n {
		t.Fatalf("pushed %d bytes: %d arrived, step %+v", n, got, s)
	}
	if conns := a.h.Network().ConnsToPeer(b.ID()); len(conns) != 1 || !p2p.IsRelayed(conns[0].RemoteMultiaddr()) {
		t.Fatalf("a's connections to b: %v, want the relayed one alone", conns)
	}
}

// A relay that serves no one refuses the reservation with a status
// relayStep reads.
func TestRelayRefusalStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relay := openRelay(t, nobody{})
	a := relayRogue(t, relay)
	s := relayStep("reservation", a.ReserveSlot(ctx, relay))
	if s.Answer != Refused || s.Code != pbv2.Status_PERMISSION_DENIED.String() {
		t.Fatalf("a reservation on a relay that serves no one: %+v", s)
	}
	b := relayRogue(t, relay)
	if s := relayStep("circuit", a.Via(ctx, relay, b.ID())); s.Answer != Refused || s.Code != pbv2.Status_NO_RESERVATION.String() {
		t.Fatalf("a circuit to a peer with no slot: %+v", s)
	}
}

func TestRelayStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{client.ReservationError{Status: pbv2.Status_RESERVATION_REFUSED}, "RESERVATION_REFUSED"},
		{fmt.Errorf("dial: %w", errors.New("error opening relay circuit: PERMISSION_DENIED (201)")), "PERMISSION_DENIED"},
		{errors.New("stream reset"), ""},
	} {
		if got := relayStatus(c.err); got != c.want {
			t.Errorf("relayStatus(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
