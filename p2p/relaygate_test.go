package p2p

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// members is a RelayPeers the tests set by hand: who is a member, and
// which pairs hold a live lease.
type members struct {
	mu      sync.Mutex
	members map[peer.ID]bool
	pairs   map[[2]peer.ID]bool
	joined  chan struct{}
}

func newMembers() *members {
	return &members{members: map[peer.ID]bool{}, pairs: map[[2]peer.ID]bool{}, joined: make(chan struct{})}
}

func (n *members) Joined() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.joined
}

func (n *members) Member(p peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members[p]
}

func (n *members) Paired(a, b peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pairs[[2]peer.ID{min(a, b), max(a, b)}]
}

func (n *members) join(hs ...host.Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range hs {
		n.members[h.ID()] = true
	}
	close(n.joined)
	n.joined = make(chan struct{})
}

func (n *members) lease(a, b host.Host, live bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pairs[[2]peer.ID{min(a.ID(), b.ID()), max(a.ID(), b.ID())}] = live
}

// relayNet is a relay on loopback that serves the members of net, and
// the hosts that reserve and dial through it.
type relayNet struct {
	t   *testing.T
	r   host.Host
	net *members
	reg *prometheus.Registry
}

func newRelayNet(t *testing.T, l RelayLimits) *relayNet {
	t.Helper()
	n := &relayNet{t: t, net: newMembers(), reg: prometheus.NewRegistry()}
	l.Peers, l.Metrics = n.net, n.reg
	r, err := NewHost(HostConfig{Key: newKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: Reachability{Force: ReachPublic, RelayService: true, RelayLimits: l}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	n.r = r
	poll.Until(t, "the relay service to start", 5*time.Second, func() bool {
		return slices.Contains(r.Mux().Protocols(), proto.ProtoIDv2Hop)
	})
	return n
}

func (n *relayNet) info() peer.AddrInfo { return peer.AddrInfo{ID: n.r.ID(), Addrs: n.r.Addrs()} }

// host starts a host on ip that can reserve and dial through the relay,
// and answers echoProto. Its reachability stays unknown, so it reserves
// only when a test says.
func (n *relayNet) host(ip string) host.Host {
	n.t.Helper()
	h, err := NewHost(HostConfig{Key: newKey(n.t), Listen: []string{"/ip4/" + ip + "/tcp/0"},
		Reachability: Reachability{RelayClient: true, StaticRelays: []peer.AddrInfo{n.info()}}})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.t.Cleanup(func() { cancel(); h.Close() })
	serveEcho(ctx, h)
	return h
}

func (n *relayNet) reserve(h host.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Reserve(ctx, h, n.info())
	return err
}

// via connects from to to through the relay alone: from first drops its
// connections to to and the addresses identify told it (on loopback it
// would dial them directly).
func (n *relayNet) via(from, to host.Host) error {
	for _, c := range from.Network().ConnsToPeer(to.ID()) {
		_ = c.Close()
	}
	from.Peerstore().ClearAddrs(to.ID())
	circuit := ma.StringCast(n.r.Addrs()[0].String() + "/p2p/" + n.r.ID().String() + "/p2p-circuit")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return from.Connect(ctx, peer.AddrInfo{ID: to.ID(), Addrs: []ma.Multiaddr{circuit}})
}

// call sends size bytes from from to to's echo and checks the reply.
func call(from, to host.Host, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out string
	if err := Call(ctx, from, to.ID(), echoProto, strings.Repeat("x", size), &out); err != nil {
		return err
	}
	if len(out) != len("echo ")+size {
		return errors.New("short echo")
	}
	return nil
}

// count is the value of the series name with label set to value.
func (n *relayNet) count(name, label, value string) float64 {
	n.t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func refusedWith(err error, status pbv2.Status) bool {
	var re client.ReservationError
	return errors.As(err, &re) && re.Status == status
}

// A peer never seen in the network's topics gets no slot; a member does.
func TestRelaySlotsForMembersOnly(t *testing.T) {
	n := newRelayNet(t, RelayLimits{ReserveWait: -1})
	stranger, member := n.host("127.0.0.1"), n.host("127.0.0.1")
	n.net.join(member)
	if err := n.reserve(stranger); !refusedWith(err, pbv2.Status_PERMISSION_DENIED) {
		t.Fatalf("a stranger's reservation: %v, want permission denied", err)
	}
	if got := n.count("e31_relay_reservations_refused_total", "reason", relayStranger); got != 1 {
		t.Fatalf("reservations refused to strangers: %v, want 1", got)
	}
	if err := n.reserve(member); err != nil {
		t.Fatalf("a member's reservation: %v", err)
	}
}

// A new peer's reservation waits for its first message: it gets its slot
// the moment the node calls it a member, not a retry later.
func TestRelayHoldsANewPeersSlot(t *testing.T) {
	n := newRelayNet(t, RelayLimits{ReserveWait: 20 * time.Second})
	newcomer := n.host("127.0.0.1")
	got := make(chan error, 1)
	start := time.Now()
	go func() { got <- n.reserve(newcomer) }()
	joined := time.Now()
	n.net.join(newcomer)
	if err := <-got; err != nil {
		t.Fatalf("the newcomer's reservation: %v", err)
	}
	if d := time.Since(joined); d > time.Second {
		t.Fatalf("slot came %s after the peer joined (asked %s before), want at once", d, joined.Sub(start))
	}

	// One that never becomes a member is refused when the wait ends.
	short := newRelayNet(t, RelayLimits{ReserveWait: 300 * time.Millisecond})
	if err := short.reserve(short.host("127.0.0.1")); !refusedWith(err, pbv2.Status_PERMISSION_DENIED) {
		t.Fatalf("a stranger's reservation after the wait: %v, want permission denied", err)
	}
}

// A host behind a NAT that a relay refused because nothing of its had
// arrived yet asks again on its own, and holds a slot soon after the relay
// sees it: a circuit to it connects. (On loopback the relay's addresses
// are not public, so the slot gives the host no address of its own.)
func TestRelayClientRetriesARefusedSlot(t *testing.T) {
	n := newRelayNet(t, RelayLimits{ReserveWait: -1})
	h, err := NewHost(HostConfig{Key: newKey(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Reachability: Reachability{Force: ReachPrivate, RelayClient: true, StaticRelays: []peer.AddrInfo{n.info()}, RelayRetry: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	poll.Until(t, "the relay to refuse the new host's first reservation", 10*time.Second, func() bool {
		return n.count("e31_relay_reservations_refused_total", "reason", relayStranger) >= 1
	})
	// libp2p's series are the process's, shared by every relay of the
	// test binary: count from here.
	opened := func() float64 { return n.count("libp2p_relaysvc_reservations_total", "type", "opened") }
	before := opened()
	joined := time.Now()
	n.net.join(h)
	poll.Until(t, "a slot for the host once the relay sees it", 20*time.Second, func() bool { return opened() > before })
	t.Logf("slot %s after the relay saw the host (RelayRetry 1s)", time.Since(joined).Round(time.Millisecond))
	probe := n.host("127.0.0.1")
	n.net.join(probe)
	if err := n.via(probe, h); err != nil {
		t.Fatalf("a circuit to the host through its slot: %v", err)
	}
}

// On a relay that carries data: no circuit with a stranger at either
// end; between two members with no lease together, a circuit that
// carries no more than a limited one and is cut past it; between a live
// lease's parties, one that carries their data, on the circuit the
// proposal opened before the lease, even when the data comes a moment
// before the lease's announcement.
func TestRelayDataOnlyBetweenALeasesParties(t *testing.T) {
	n := newRelayNet(t, RelayLimits{Data: -1, ReserveWait: -1, PairWait: 2 * time.Second})
	a, b, stranger := n.host("127.0.0.1"), n.host("127.0.0.1"), n.host("127.0.0.1")
	n.net.join(a, b)
	if err := n.reserve(a); err != nil {
		t.Fatal(err)
	}
	if err := n.via(stranger, a); err == nil {
		t.Fatal("a stranger opened a circuit to a member")
	}
	if got := n.count("e31_relay_circuits_refused_total", "reason", relayStranger); got != 1 {
		t.Fatalf("circuits refused to strangers: %v, want 1", got)
	}

	// Members, no lease: a proposal's worth goes through, data does not.
	if err := n.via(b, a); err != nil {
		t.Fatalf("a circuit between members: %v", err)
	}
	if err := call(b, a, 4<<10); err != nil {
		t.Fatalf("a control message between members: %v", err)
	}
	if err := call(b, a, 256<<10); err == nil {
		t.Fatal("256 KiB went between members that hold no lease together")
	}
	poll.Until(t, "the relay to count the cut", 5*time.Second, func() bool {
		return n.count("e31_relay_circuits_ended_total", "reason", relayAllowance) == 1
	})
	if got := n.count("e31_relay_bytes_total", "circuit", relayBytesData); got != 0 {
		t.Fatalf("%v data bytes between members with no lease", got)
	}

	// Their lease is announced: the same kind of circuit carries data.
	n.net.lease(a, b, true)
	if err := n.via(b, a); err != nil {
		t.Fatalf("a circuit between a lease's parties: %v", err)
	}
	if got, via := PeerPath(b, a.ID()); got != PathRelayedData || via != n.r.ID() {
		t.Fatalf("PeerPath(b, a) = %v via %s, want relayed-data via the relay", got, via)
	}
	if err := call(b, a, 512<<10); err != nil {
		t.Fatalf("512 KiB between a lease's parties: %v", err)
	}
	poll.Until(t, "the relay to count the data", 5*time.Second, func() bool {
		return n.count("e31_relay_bytes_total", "circuit", relayBytesData) >= 1<<20
	})

	// A circuit opened before the lease (a proposal's) carries its data
	// once the relay sees the lease.
	n.net.lease(a, b, false)
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	if err := call(b, a, 4<<10); err != nil {
		t.Fatalf("a proposal between members: %v", err)
	}
	proposal := b.Network().ConnsToPeer(a.ID())
	n.net.lease(a, b, true)
	if err := call(b, a, 256<<10); err != nil {
		t.Fatalf("the lease's data over the proposal's circuit: %v", err)
	}
	same := func(what string) {
		t.Helper()
		if now := b.Network().ConnsToPeer(a.ID()); len(proposal) != 1 || len(now) != 1 || now[0].ID() != proposal[0].ID() {
			t.Fatalf("connections %v after %s, want the proposal's circuit %v alone", now, what, proposal)
		}
	}
	same("the lease's data")

	// The data starts before the relay hears of the lease (a task's lease
	// is announced with its array's, about once a second): past the
	// allowance it waits for the announcement.
	n.net.lease(a, b, false)
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	proposal = b.Network().ConnsToPeer(a.ID())
	control := func() float64 { return n.count("e31_relay_bytes_total", "circuit", relayBytesControl) }
	before := control()
	sent := make(chan error, 1)
	go func() { sent <- call(b, a, 256<<10) }()
	// The allowance is 128 KiB each way, less what identify took.
	poll.Until(t, "the circuit to carry its allowance", 5*time.Second, func() bool { return control()-before >= 120<<10 })
	n.net.lease(a, b, true)
	if err := <-sent; err != nil {
		t.Fatalf("data that came before its lease's announcement: %v", err)
	}
	same("data that came before its lease's announcement")
}

// A relay that carries no data gives members limited circuits: their
// control messages go through, and libp2p keeps bulk transfers off them.
func TestRelayWithoutDataGivesMembersLimitedCircuits(t *testing.T) {
	n := newRelayNet(t, RelayLimits{ReserveWait: -1})
	a, b := n.host("127.0.0.1"), n.host("127.0.0.1")
	n.net.join(a, b)
	n.net.lease(a, b, true)
	if err := n.reserve(a); err != nil {
		t.Fatal(err)
	}
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := PeerPath(b, a.ID()); got != PathRelayed {
		t.Fatalf("PeerPath(b, a) = %v, want relayed (limited)", got)
	}
	if err := call(b, a, 4<<10); err != nil {
		t.Fatalf("a control message over a limited circuit: %v", err)
	}
}

// A peer's byte budget ends its data circuit once spent, and its lease's
// next circuit is a limited one until the window ends.
func TestRelayPeerBudgetEndsDataCircuits(t *testing.T) {
	n := newRelayNet(t, RelayLimits{Data: -1, ReserveWait: -1, BudgetPeer: 1 << 20})
	a, b := n.host("127.0.0.1"), n.host("127.0.0.1")
	n.net.join(a, b)
	n.net.lease(a, b, true)
	if err := n.reserve(a); err != nil {
		t.Fatal(err)
	}
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	spent := false
	for i := 0; i < 8 && !spent; i++ { // 2 × 256 KiB a call, against a 1 MiB budget
		spent = call(b, a, 256<<10) != nil
	}
	if !spent {
		t.Fatal("4 MiB went through a 1 MiB budget")
	}
	poll.Until(t, "the relay to count the budget's end", 5*time.Second, func() bool {
		return n.count("e31_relay_circuits_ended_total", "reason", relayBudget) == 1 &&
			n.count("e31_relay_budgets_spent_total", "budget", BudgetPeer) >= 1
	})
	if got := n.count("e31_relay_bytes_total", "circuit", relayBytesData); got < 1<<20 || got > 1<<20+4*dataCharge {
		t.Fatalf("%v data bytes counted for a 1 MiB budget", got)
	}
	if err := n.via(b, a); err != nil {
		t.Fatalf("a circuit for the lease's messages after its budget: %v", err)
	}
	if got, _ := PeerPath(b, a.ID()); got != PathRelayed {
		t.Fatalf("PeerPath(b, a) = %v after the budget, want relayed (limited)", got)
	}
	if err := call(b, a, 4<<10); err != nil {
		t.Fatalf("the lease's messages after its budget: %v", err)
	}
	if got := n.count("e31_relay_circuits_refused_total", "reason", relayBudget); got != 1 {
		t.Fatalf("data circuits refused for a spent budget: %v, want 1", got)
	}
}

// An address prefix's budget is shared by every peer behind it: another
// pair on 127.0.0.1 gets no data once one pair spent it, while a pair on
// 127.0.0.2, a prefix of its own at the default /32, still does.
func TestRelayPrefixBudgetIsShared(t *testing.T) {
	n := newRelayNet(t, RelayLimits{Data: -1, ReserveWait: -1, BudgetPrefix: 1 << 20})
	a, b, c, d := n.host("127.0.0.1"), n.host("127.0.0.1"), n.host("127.0.0.1"), n.host("127.0.0.1")
	e, f := n.host("127.0.0.2"), n.host("127.0.0.2")
	n.net.join(a, b, c, d, e, f)
	n.net.lease(a, b, true)
	n.net.lease(c, d, true)
	n.net.lease(e, f, true)
	for _, h := range []host.Host{a, c, e} {
		if err := n.reserve(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.via(f, e); err != nil {
		t.Fatal(err)
	}
	if src := n.r.Network().ConnsToPeer(f.ID()); len(src) == 0 || prefixOf(src[0].RemoteMultiaddr(), 32, 64) != "127.0.0.2/32" {
		t.Skipf("the relay sees f at %v, not from 127.0.0.2: no second loopback address here", src)
	}
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8 && call(b, a, 256<<10) == nil; i++ {
	}
	if err := n.via(d, c); err != nil {
		t.Fatal(err)
	}
	if got, _ := PeerPath(d, c.ID()); got != PathRelayed {
		t.Fatalf("a second pair on 127.0.0.1 got %v after the prefix's budget was spent, want relayed (limited)", got)
	}
	if got, _ := PeerPath(f, e.ID()); got != PathRelayedData {
		t.Fatalf("the pair on 127.0.0.2 has %v, want relayed-data", got)
	}
	if err := call(f, e, 256<<10); err != nil {
		t.Fatalf("data on 127.0.0.2 after 127.0.0.1's budget was spent: %v", err)
	}
}

// A circuit between members with no lease lasts no longer than a limited
// one, even idle; one between a lease's parties outlives it.
func TestRelayUnpairedCircuitEnds(t *testing.T) {
	n := newRelayNet(t, RelayLimits{Data: -1, ReserveWait: -1, Duration: 500 * time.Millisecond})
	a, b, c := n.host("127.0.0.1"), n.host("127.0.0.1"), n.host("127.0.0.1")
	n.net.join(a, b, c)
	n.net.lease(a, c, true)
	if err := n.reserve(a); err != nil {
		t.Fatal(err)
	}
	if err := n.via(b, a); err != nil {
		t.Fatal(err)
	}
	if err := n.via(c, a); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the unpaired circuit to end", 10*time.Second, func() bool {
		return len(b.Network().ConnsToPeer(a.ID())) == 0
	})
	if got := n.count("e31_relay_circuits_ended_total", "reason", relayUnpaired); got != 1 {
		t.Fatalf("circuits ended unpaired: %v, want 1", got)
	}
	if len(c.Network().ConnsToPeer(a.ID())) == 0 {
		t.Fatal("the lease's circuit ended with the other")
	}
	if err := call(c, a, 256<<10); err != nil {
		t.Fatalf("the lease's circuit after a limited one's time: %v", err)
	}
}
