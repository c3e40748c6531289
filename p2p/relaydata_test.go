package p2p

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRelayCarryingData: a relay that sets no limit on its circuits gives
// an unlimited connection, which PeerPath reports as relayed-data through
// that relay; the relay's series count what it carried; and its quota
// refuses a peer's circuits past the day's bound. On loopback, as
// TestRelayOnLoopback.
func TestRelayCarryingData(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop := []string{"/ip4/127.0.0.1/tcp/0"}
	reg := prometheus.NewRegistry()
	r, err := NewHost(HostConfig{Key: newKey(t), Listen: loop, Reachability: Reachability{Force: ReachPublic, RelayService: true,
		RelayLimits: RelayLimits{Data: -1, CircuitsPerDay: 2, Metrics: reg}}})
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
	b, err := NewHost(HostConfig{Key: newKey(t), Listen: loop,
		Reachability: Reachability{RelayClient: true, StaticRelays: []peer.AddrInfo{rInfo}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p/" + r.ID().String() + "/p2p-circuit")
	connectFrom := func(h host.Host) error {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		return h.Connect(cctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuit}})
	}
	connect := func() error { return connectFrom(b) }
	// A probe of its own waits for a's slot, so that b's tries, which
	// the quota counts, are only the test's.
	probe, err := NewHost(HostConfig{Key: newKey(t), Listen: loop, Reachability: Reachability{RelayClient: true, StaticRelays: []peer.AddrInfo{rInfo}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	poll.Until(t, "a slot for a on r", 10*time.Second, func() bool { return connectFrom(probe) == nil })
	if err := connect(); err != nil {
		t.Fatalf("a circuit through r to a: %v", err)
	}
	if got, via := PeerPath(b, a.ID()); got != PathRelayedData || via != r.ID() {
		t.Fatalf("PeerPath(b, a) = %v via %s, want relayed-data via the relay %s", got, via, r.ID())
	}
	var out string
	if err := Call(ctx, b, a.ID(), echoProto, strings.Repeat("x", 256<<10), &out); err != nil {
		t.Fatalf("call over the relay with 256 KiB, past a limited circuit's 128 KiB: %v", err)
	}
	if len(out) != len("echo ")+256<<10 {
		t.Fatalf("reply of %d bytes", len(out))
	}
	poll.Until(t, "the relay's series to count what it carried", 5*time.Second, func() bool {
		return gathered(t, reg, "libp2p_relaysvc_data_transferred_bytes_total") >= 256<<10
	})

	// The day's bound is two circuits: b, cut off, opens a second, and
	// not a third. (b forgets a's own addresses, which identify told it:
	// on loopback it would dial them directly.)
	cut := func() {
		for _, c := range b.Network().ConnsToPeer(a.ID()) {
			_ = c.Close()
		}
		b.Peerstore().ClearAddrs(a.ID())
	}
	cut()
	if err := connect(); err != nil {
		t.Fatalf("the day's second circuit: %v", err)
	}
	cut()
	if err := connect(); err == nil {
		t.Fatal("a third circuit in the day was let through, past CircuitsPerDay 2")
	}
}

// gathered sums the samples of the series name in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
