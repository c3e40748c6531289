package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// echoProto is the request/response protocol the reachability tests call
// across a relay or a punched hole.
const echoProto = protocol.ID("/e31-test/echo/1")

func serveEcho(ctx context.Context, h host.Host) {
	Serve(ctx, h, echoProto, 10*time.Second, slog.New(slog.DiscardHandler),
		func(_ context.Context, from peer.ID, req json.RawMessage) (any, error) {
			var s string
			if err := DecodeStrict(req, &s); err != nil {
				return nil, err
			}
			return "echo " + s, nil
		})
}

func TestReachabilityZeroValueKeepsEverythingOff(t *testing.T) {
	h, _ := newTestHost(t)
	for _, p := range h.Mux().Protocols() {
		switch p {
		case "/libp2p/circuit/relay/0.2.0/hop", "/libp2p/circuit/relay/0.2.0/stop", "/libp2p/dcutr":
			t.Errorf("host with zero Reachability speaks %s", p)
		}
	}
	if got := HostReachability(h); got == ReachPrivate {
		t.Errorf("HostReachability = %v with nothing forced on loopback", got)
	}
}

func TestRelayClientWithoutRelaysIsRefused(t *testing.T) {
	_, err := NewHost(HostConfig{Key: newKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: Reachability{RelayClient: true}})
	if !errors.Is(err, ErrNoStaticRelays) {
		t.Fatalf("NewHost = %v, want ErrNoStaticRelays", err)
	}
}

func TestRelayLimitsResources(t *testing.T) {
	def := RelayLimits{}.resources()
	if def.Limit == nil || def.Limit.Data != 1<<17 || def.Limit.Duration != 2*time.Minute || def.MaxReservations != 128 {
		t.Fatalf("zero limits = %+v (limit %+v), want libp2p's defaults", def, def.Limit)
	}
	set := RelayLimits{Data: 64 << 20, Duration: time.Hour, MaxReservations: 7, MaxCircuits: 3, ReservationTTL: time.Minute}.resources()
	if set.Limit.Data != 64<<20 || set.Limit.Duration != time.Hour || set.MaxReservations != 7 || set.MaxCircuits != 3 || set.ReservationTTL != time.Minute {
		t.Fatalf("set limits = %+v (limit %+v)", set, set.Limit)
	}
	if unl := (RelayLimits{Data: -1}).resources(); unl.Limit != nil {
		t.Fatalf("negative Data gave limit %+v, want none", unl.Limit)
	}
}

func TestIsRelayed(t *testing.T) {
	for s, want := range map[string]bool{
		"/ip4/10.31.0.1/tcp/4001": false,
		"/ip4/10.31.0.1/tcp/4001/p2p/12D3KooWJWoaqZhDaoEFshF7Rh1bpY9ohihFhzcW6d69Lr2NASuq/p2p-circuit": true,
		"/ip4/10.31.0.1/udp/4001/quic-v1": false,
	} {
		if got := IsRelayed(ma.StringCast(s)); got != want {
			t.Errorf("IsRelayed(%s) = %v, want %v", s, got, want)
		}
	}
	if IsRelayed(nil) {
		t.Error("IsRelayed(nil) = true")
	}
}

// TestRelayOnLoopback reserves a slot on a relay, connects through it and
// calls a control protocol over the relayed connection, all on 127.0.0.1.
// Forced reachability stands in for AutoNAT, which cannot tell anything on
// one loopback interface. The hole punch needs addresses libp2p counts as
// public and two NATs; TestNAT builds those in network namespaces.
func TestRelayOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop := []string{"/ip4/127.0.0.1/tcp/0"}

	r, err := NewHost(HostConfig{Key: newKey(t), Listen: loop,
		Reachability: Reachability{Force: ReachPublic, RelayService: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	rInfo := peer.AddrInfo{ID: r.ID(), Addrs: r.Addrs()}

	a, err := NewHost(HostConfig{Key: newKey(t), Listen: loop,
		Reachability: Reachability{Force: ReachPrivate, RelayClient: true, StaticRelays: []peer.AddrInfo{rInfo}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	serveEcho(ctx, a)
	poll.Until(t, "a to report private", 5*time.Second, func() bool { return HostReachability(a) == ReachPrivate })
	poll.Until(t, "r to report public", 5*time.Second, func() bool { return HostReachability(r) == ReachPublic })
	b, err := NewHost(HostConfig{Key: newKey(t), Listen: loop,
		Reachability: Reachability{RelayClient: true, StaticRelays: []peer.AddrInfo{rInfo}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p/" + r.ID().String() + "/p2p-circuit")
	// The relay puts only public addresses in a reservation, so on loopback
	// a's slot shows up as a circuit that connects, not as an address of a.
	poll.Until(t, "a circuit through r to a", 10*time.Second, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		return b.Connect(cctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuit}}) == nil
	})
	if got, _ := PeerPath(b, a.ID()); got != PathRelayed {
		t.Fatalf("PeerPath(b, a) = %v, want relayed", got)
	}
	var out string
	if err := Call(ctx, b, a.ID(), echoProto, "ping", &out); err != nil {
		t.Fatalf("call over relay: %v", err)
	}
	if out != "echo ping" {
		t.Fatalf("reply %q", out)
	}
	if got, _ := PeerPath(b, peer.ID("nobody")); got != PathNone {
		t.Fatalf("PeerPath to a stranger = %v, want none", got)
	}
}
