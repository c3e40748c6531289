package gangnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"
)

// pairNets builds rank 0 and rank 1 of a gang of size, with a stream
// between them, each over a packet pair instead of a TUN device.
func pairNets(t *testing.T, size int) (a, b *Net, partA, partB *os.File) {
	t.Helper()
	a, partA = forwardingNet(t, testPlan(t, size, 0))
	b, partB = forwardingNet(t, testPlan(t, size, 1))
	sa, sb := memStreams()
	a.attach(a.links[1], sa, newReader(sa))
	b.attach(b.links[0], sb, newReader(sb))
	return a, b, partA, partB
}

func TestForwardDelivers(t *testing.T) {
	a, b, partA, partB := pairNets(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 1400, 9000, MTU - 20} {
		want := packet(t, "10.31.0.1", "10.31.0.2", bytes.Repeat([]byte{byte(size)}, size))
		if _, err := partA.Write(want); err != nil {
			t.Fatal(err)
		}
		got, err := readPacket(t, partB, 5*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: got %d, %v", len(want), len(got), err)
		}
	}
	back := packet(t, "10.31.0.2", "10.31.0.1", []byte("back"))
	if _, err := partB.Write(back); err != nil {
		t.Fatal(err)
	}
	if got, err := readPacket(t, partA, 5*time.Second); err != nil || !bytes.Equal(got, back) {
		t.Fatalf("the way back: %v", err)
	}
	eventually(t, "counts", func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.Out.Packets == 4 && sb.In.Packets == 4 && sb.Out.Packets == 1 && sa.In.Packets == 1
	})
	if s := a.Stats(); s.Links != 1 || len(s.Drops) != 0 {
		t.Errorf("stats %+v", s)
	}
}

// What the part sends is dropped, and counted, unless it comes from its
// own address and goes to another member's.
func TestForwardDropsFromPart(t *testing.T) {
	a, _, partA, partB := pairNets(t, 3) // rank 2 (10.31.0.3) has no stream
	ipv6 := make([]byte, 40)
	ipv6[0] = 0x60
	for _, c := range []struct {
		pkt  []byte
		want DropReason
	}{
		{packet(t, "10.31.0.3", "10.31.0.2", []byte("as rank 2")), DropSpoofed},
		{packet(t, "10.31.0.200", "10.31.0.2", []byte("made up")), DropSpoofed},
		{packet(t, "10.31.0.1", "10.31.0.9", []byte("no member")), DropNotMember},
		{packet(t, "10.31.0.1", "10.31.0.255", []byte("broadcast")), DropNotMember},
		{packet(t, "10.31.0.1", "10.31.0.1", []byte("itself")), DropNotMember},
		{packet(t, "10.31.0.1", "192.0.2.1", []byte("the world")), DropNotMember},
		{packet(t, "10.31.0.1", "224.0.0.1", []byte("multicast")), DropNotMember},
		{packet(t, "10.31.0.1", "10.31.0.3", []byte("no stream")), DropNoLink},
		{ipv6, DropNotIPv4},
		{[]byte{0x45, 0, 0}, DropNotIPv4},
	} {
		before := a.Stats().Drops[c.want]
		if _, err := partA.Write(c.pkt); err != nil {
			t.Fatal(err)
		}
		eventually(t, string(c.want), func() bool { return a.Stats().Drops[c.want] == before+1 })
	}
	if got, err := readPacket(t, partB, 200*time.Millisecond); err == nil {
		t.Fatalf("rank 1 got %x", got)
	}
	if s := a.Stats(); s.Out.Packets != 0 {
		t.Errorf("forwarded %d packets", s.Out.Packets)
	}
}

// What arrives on a member's stream is delivered only if it comes from
// that member's address, for this part's.
func TestForwardDropsFromStream(t *testing.T) {
	a, partA := forwardingNet(t, testPlan(t, 3, 0))
	ours, theirs := memStreams()
	a.attach(a.links[1], ours, newReader(ours))
	send := func(p []byte) {
		t.Helper()
		if _, err := theirs.Write(appendFrame(nil, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		pkt  []byte
		want DropReason
	}{
		{packet(t, "10.31.0.3", "10.31.0.1", []byte("rank 1 as rank 2")), DropWrongSource},
		{packet(t, "10.31.0.1", "10.31.0.1", []byte("as ourselves")), DropWrongSource},
		{packet(t, "10.31.0.2", "10.31.0.3", []byte("for rank 2")), DropWrongDest},
		{packet(t, "10.31.0.2", "10.31.0.77", []byte("for nobody")), DropWrongDest},
		{[]byte{0x60, 1, 2, 3}, DropNotIPv4},
	} {
		before := a.Stats().Drops[c.want]
		send(c.pkt)
		eventually(t, string(c.want), func() bool { return a.Stats().Drops[c.want] == before+1 })
	}
	if got, err := readPacket(t, partA, 200*time.Millisecond); err == nil {
		t.Fatalf("delivered %x", got)
	}
	good := packet(t, "10.31.0.2", "10.31.0.1", []byte("fine"))
	send(good)
	if got, err := readPacket(t, partA, 5*time.Second); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("a good packet after the bad: %v", err)
	}
	// An empty frame is no packet at all: the stream goes.
	empty := binary.BigEndian.AppendUint16(nil, 0)
	go func() { _, _ = theirs.Write(empty) }()
	eventually(t, "the stream reset", func() bool { return a.Stats().Links == 0 })
}

func TestForwardQueueFull(t *testing.T) {
	a, partA := forwardingNet(t, testPlan(t, 2, 0))
	// A stream that nobody reads: the writer blocks on its first flush
	// and the queue fills behind it.
	ours, _ := memStreams()
	a.attach(a.links[1], ours, newReader(ours))
	pkt := packet(t, "10.31.0.1", "10.31.0.2", make([]byte, 1000))
	for range queueLen + 50 {
		if _, err := partA.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "queue-full drops", func() bool { return a.Stats().Drops[DropQueueFull] > 0 })
}

func TestReadyAndClose(t *testing.T) {
	a, _ := forwardingNet(t, testPlan(t, 3, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Ready(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready with no streams: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Ready(context.Background()) }()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Ready across Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s, _ := memStreams()
	if _, ok := a.attach(a.links[1], s, newReader(s)); ok {
		t.Fatal("a closed Net took a stream")
	}
}

func TestAdmit(t *testing.T) {
	p := testPlan(t, 4, 2)
	n, _ := forwardingNet(t, p)
	for _, c := range []struct {
		h    hello
		from int
		ok   bool
	}{
		{hello{From: 0, To: 2}, 0, true},
		{hello{From: 1, To: 2}, 1, true},
		{hello{From: 1, To: 2}, 0, false}, // rank 0's daemon speaking for rank 1
		{hello{From: 3, To: 2}, 3, false}, // the higher rank dials
		{hello{From: 0, To: 1}, 0, false}, // not this part
		{hello{From: 2, To: 2}, 2, false},
		{hello{From: -1, To: 2}, 0, false},
	} {
		l, ok := n.admit(c.h, p.Members[c.from].Peer)
		if ok != c.ok || ok && l.rank != c.h.From {
			t.Errorf("%+v from rank %d's peer: %v", c.h, c.from, ok)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	p := testPlan(t, 3, 1)
	good := p.Config
	self := good.Members[1].Peer
	if got := p.prefix(2).String(); got != "10.31.0.3/24" {
		t.Errorf("rank 2's prefix %s", got)
	}
	for name, edit := range map[string]func(*Config){
		"no gang":       func(c *Config) { c.Gang = "" },
		"lease path":    func(c *Config) { c.Lease = "../x" },
		"lease dotdot":  func(c *Config) { c.Lease = ".." },
		"one member":    func(c *Config) { c.Members = c.Members[:1]; c.Self = 0 },
		"self out":      func(c *Config) { c.Self = 3 },
		"rank order":    func(c *Config) { c.Members[2].Rank = 5 },
		"self is other": func(c *Config) { c.Members[0].Peer = self },
		"same peer":     func(c *Config) { c.Members[2].Peer = c.Members[0].Peer },
		"ipv6 subnet":   func(c *Config) { c.Subnet = netip.MustParsePrefix("fd31::/64") },
		"small subnet":  func(c *Config) { c.Subnet = netip.MustParsePrefix("10.31.0.0/31") },
		"full subnet": func(c *Config) {
			c.Subnet = netip.MustParsePrefix("10.31.0.0/30")
			c.Members = append(c.Members, Member{Rank: 3, Peer: "x"})
		},
	} {
		c := good
		c.Members = append([]Member(nil), good.Members...)
		edit(&c)
		if _, err := c.check(self); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := good
	c.Subnet = netip.MustParsePrefix("10.99.5.7/29")
	q, err := c.check(self)
	if err != nil || q.prefix(0).String() != "10.99.5.1/29" || q.rankOf([4]byte{10, 99, 5, 3}) != 2 || q.rankOf([4]byte{10, 99, 5, 4}) != -1 {
		t.Errorf("a /29: %v %v", q.prefix(0), err)
	}
}
