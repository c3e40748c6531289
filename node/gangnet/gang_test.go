package gangnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// requireEnv turns a missing prerequisite into a failure, as in the
// project's other tests of sandboxes and namespaces.
const requireEnv = "E31_REQUIRE_RUNC"

// requireRoot skips a test that makes namespaces and TUN devices where
// that cannot be done, or fails it under requireEnv.
func requireRoot(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root to make network namespaces and TUN devices"
	} else if _, err := os.Stat("/dev/net/tun"); err != nil {
		why = "no /dev/net/tun: " + err.Error()
	}
	if why == "" {
		return
	}
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s is set but the test %s", requireEnv, why)
	}
	t.Skip(why)
}

func randomID(t testing.TB) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// newHost starts a real libp2p host on loopback, as the node's are: TCP
// only, no relay, no mDNS.
func newHost(t testing.TB) host.Host {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: sk, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// gang is a gang network on real hosts, one per part, with every stream up.
type gang struct {
	id    string
	hosts []host.Host
	regs  []*Registry
	nets  []*Net
}

func newGang(t testing.TB, size int) *gang {
	t.Helper()
	requireRoot(t)
	g := &gang{id: "gang-" + randomID(t)}
	log := slog.New(slog.DiscardHandler)
	var members []Member
	for i := range size {
		h := newHost(t)
		r := NewRegistry(h, log)
		t.Cleanup(func() {
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		})
		g.hosts, g.regs = append(g.hosts, h), append(g.regs, r)
		members = append(members, Member{Rank: i, Peer: h.ID()})
	}
	// Each daemon knows where the others are, as routing would tell it.
	for _, a := range g.hosts {
		for _, b := range g.hosts {
			if a != b {
				a.Peerstore().AddAddrs(b.ID(), b.Addrs(), peerstore.PermanentAddrTTL)
			}
		}
	}
	for i, r := range g.regs {
		n, err := r.Open(context.Background(), Config{Gang: g.id, Lease: fmt.Sprintf("t%s-%d", g.id, i), Self: i, Members: members})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := n.Close(); err != nil {
				t.Error(err)
			}
		})
		g.nets = append(g.nets, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range g.nets {
		if err := n.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// inNamespace runs fn on a thread in the namespace at path. Sockets that
// fn makes stay in that namespace wherever they are used afterwards.
func inNamespace(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Unlocked only once back: a thread that could not return dies
		// with this goroutine.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// echoTCP serves TCP echo on rank's address in its namespace.
func echoTCP(t testing.TB, n *Net, rank int) netip.AddrPort {
	t.Helper()
	var l net.Listener
	err := inNamespace(n.NetNSPath(), func() (err error) {
		l, err = net.Listen("tcp4", netip.AddrPortFrom(n.Addr(rank), 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}

// dialTCP connects from n's namespace.
func dialTCP(n *Net, to string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(n.NetNSPath(), func() (err error) {
		c, err = net.DialTimeout("tcp4", to, timeout)
		return err
	})
	return c, err
}

// echoes sends size random bytes through an echo server and checks what
// comes back.
func echoes(t testing.TB, from *Net, to netip.AddrPort, size int) {
	t.Helper()
	c, err := dialTCP(from, to.String(), 5*time.Second)
	if err != nil {
		t.Fatalf("connect to %s: %v", to, err)
	}
	defer c.Close()
	want := make([]byte, size)
	rand.Read(want)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		errc <- err
	}()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read the echo from %s: %v", to, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the echo from %s differs", to)
	}
}

func TestGangTCPAndUDP(t *testing.T) {
	g := newGang(t, 2)
	a, b := g.nets[0], g.nets[1]
	if a.Addr(0).String() != "10.31.0.1" || b.Addr(1).String() != "10.31.0.2" {
		t.Fatalf("addresses %s %s", a.Addr(0), b.Addr(1))
	}
	echoes(t, b, echoTCP(t, a, 0), 8<<20)
	echoes(t, a, echoTCP(t, b, 1), 1<<20)

	// UDP, up to a datagram that fills the MTU: the stream carries it
	// whole, unfragmented.
	var pc net.PacketConn
	if err := inNamespace(a.NetNSPath(), func() (err error) {
		pc, err = net.ListenPacket("udp4", a.Addr(0).String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, MTU)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	var uc net.Conn
	if err := inNamespace(b.NetNSPath(), func() (err error) {
		uc, err = net.Dial("udp4", pc.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	buf := make([]byte, MTU)
	for _, size := range []int{1, 1400, 9000, MTU - 28} {
		want := make([]byte, size)
		rand.Read(want)
		var got []byte
		// UDP may lose a datagram; the network does not promise more.
		for try := 0; try < 3 && got == nil; try++ {
			if _, err := uc.Write(want); err != nil {
				t.Fatalf("send %d bytes: %v", size, err)
			}
			_ = uc.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := uc.Read(buf); err == nil {
				got = buf[:n]
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("UDP datagram of %d bytes: got %d back", size, len(got))
		}
	}
	if s := b.Stats(); s.Out.Packets == 0 || s.In.Packets == 0 || s.Links != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestGangOfThree(t *testing.T) {
	g := newGang(t, 3)
	for i, server := range g.nets {
		addr := echoTCP(t, server, i)
		for j, client := range g.nets {
			if i != j {
				echoes(t, client, addr, 256<<10)
			}
		}
	}
	for i, n := range g.nets {
		if s := n.Stats(); s.Links != 2 || len(s.Drops) != 0 {
			t.Errorf("rank %d: %+v", i, s)
		}
	}
}

// Inside, the part has lo and e31g0 with its address and nothing else:
// no default route, no IPv6.
func TestGangNamespaceHoldsOnlyItsInterface(t *testing.T) {
	g := newGang(t, 2)
	b := g.nets[1]
	ns, err := netns.GetFromPath(b.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	if len(names) != 2 {
		t.Errorf("links %v, want lo and %s", names, Interface)
	}
	l, err := h.LinkByName(b.Interface())
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().MTU != MTU || l.Attrs().OperState == netlink.OperDown {
		t.Errorf("%s: MTU %d, state %s", Interface, l.Attrs().MTU, l.Attrs().OperState)
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.31.0.2/24" {
		t.Errorf("%s holds %v, want only 10.31.0.2/24", Interface, addrs)
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.To4() == nil || r.Dst.String() != "10.31.0.0/24" {
			t.Errorf("route %v: want only the subnet's", r)
		}
	}
}

func TestGangIsolation(t *testing.T) {
	g := newGang(t, 2)
	a, b := g.nets[0], g.nets[1]
	echoTCP(t, a, 0)

	// A free address in the subnet: the daemon drops the SYN, and the
	// connect times out.
	before := b.Stats().Drops[DropNotMember]
	if c, err := dialTCP(b, "10.31.0.9:80", time.Second); err == nil {
		c.Close()
		t.Fatal("connected to a non-member")
	}
	if b.Stats().Drops[DropNotMember] == before {
		t.Error("the SYN to a non-member was not counted")
	}

	// The provider's loopback: the part's 127.0.0.1 is its own lo.
	hostL, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostL.Close()
	go func() {
		for {
			c, err := hostL.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if c, err := dialTCP(b, hostL.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("reached a listener on the provider's loopback")
	}
	// Beyond the subnet there is no route at all.
	if c, err := dialTCP(b, "10.32.0.1:80", time.Second); err == nil || !errors.Is(err, unix.ENETUNREACH) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("connect beyond the subnet: %v, want network unreachable", err)
	}

	// A packet that claims another source, sent raw by a part that could:
	// its daemon drops it.
	err = inNamespace(b.NetNSPath(), func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		pkt := packet(t, "10.31.0.77", "10.31.0.1", []byte("spoofed"))
		return unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{10, 31, 0, 1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the spoofed packet's drop", func() bool { return b.Stats().Drops[DropSpoofed] > 0 })
}

// A stream from a daemon not named for the rank it claims is refused, and
// one for a gang not open here is told so.
func TestGangRefusesStrangers(t *testing.T) {
	g := newGang(t, 2)
	b := g.nets[1]
	stranger := newHost(t)
	stranger.Peerstore().AddAddrs(g.hosts[1].ID(), g.hosts[1].Addrs(), peerstore.PermanentAddrTTL)
	ask := func(h hello) (byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := stranger.NewStream(ctx, g.hosts[1].ID(), Protocol)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := s.Write(h.marshal()); err != nil {
			return 0, err
		}
		var code [1]byte
		_, err = io.ReadFull(s, code[:])
		return code[0], err
	}
	if code, err := ask(hello{Gang: g.id, From: 0, To: 1}); err != nil || code != replyRefused {
		t.Fatalf("a stranger as rank 0: code %d, %v", code, err)
	}
	if s := b.Stats(); s.Refused != 1 || s.Links != 1 {
		t.Errorf("after the stranger: %+v", s)
	}
	if code, err := ask(hello{Gang: "another", From: 0, To: 1}); err != nil || code != replyNoGang {
		t.Fatalf("another gang: code %d, %v", code, err)
	}
	// Not a hello at all: the stream is reset unanswered.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := stranger.NewStream(ctx, g.hosts[1].ID(), Protocol)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte{0xff, 0xff, 1, 2, 3})
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := s.Read(make([]byte, 1)); err == nil {
		t.Fatalf("garbage was answered (%d bytes)", n)
	}
	s.Reset()
	// The real member's stream is untouched by all this.
	echoes(t, b, echoTCP(t, g.nets[0], 0), 64<<10)
}

func TestGangCloseRemovesAll(t *testing.T) {
	g := newGang(t, 2)
	a, b := g.nets[0], g.nets[1]
	path := a.NetNSPath()
	if path != "/run/netns/e31-t"+g.id+"-0" {
		t.Errorf("namespace at %s", path)
	}
	// The sysfs shows the namespace's links, not the provider's.
	if names, err := os.ReadDir(a.SysfsPath() + "/class/net"); err != nil || len(names) != 2 || names[0].Name() != Interface || names[1].Name() != "lo" {
		t.Errorf("%s/class/net: %v, %v", a.SysfsPath(), names, err)
	}
	// Holding the namespace keeps it alive past Close, to look inside.
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if _, err := g.regs[0].Open(context.Background(), Config{Gang: g.id, Lease: "other", Self: 0, Members: a.plan.Members}); !errors.Is(err, ErrGangOpen) {
		t.Errorf("a second Open of the gang: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, p := range []string{path, a.SysfsPath()} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Close: %v", p, err)
		}
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.LinkByName(Interface); err == nil {
		t.Errorf("%s is still there after Close", Interface)
	}
	eventually(t, "rank 1 to see the stream go", func() bool { return b.Stats().Links == 0 })
	// The gang may be opened again here once closed.
	n, err := g.regs[0].Open(context.Background(), Config{Gang: g.id, Lease: "t" + g.id + "-again", Self: 0, Members: a.plan.Members})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Ready(ctx); err != nil {
		t.Fatalf("rank 1 after rank 0 came back: %v", err)
	}
	echoes(t, b, echoTCP(t, n, 0), 64<<10)
}

func TestSweep(t *testing.T) {
	requireRoot(t)
	// A namespace prefix of this test's own, so that a sweep here never
	// takes a namespace from a test running beside it.
	prefix := namespacePrefix + "sweep" + randomID(t) + "-"
	var left []string
	for i := range 2 {
		ns, dev, err := createNamespace(fmt.Sprintf("%s%d", prefix, i), netip.MustParsePrefix("10.31.0.1/24"))
		if err != nil {
			t.Fatal(err)
		}
		dev.Close() // as a daemon that died would
		left = append(left, ns.path, ns.sys)
	}
	keep := netnsDir + "/keep-" + prefix + "0"
	if err := os.WriteFile(keep, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(keep)
	if err := sweep(slog.New(slog.DiscardHandler), prefix); err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Sweep: %v", p, err)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("Sweep took %s, which is not its own: %v", keep, err)
	}
}
