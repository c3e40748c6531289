package gangnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sys/unix"
)

// packet builds an IPv4 packet (protocol 253, for experiments) from src to
// dst carrying payload.
func packet(t testing.TB, src, dst string, payload []byte) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	p := make([]byte, 20, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(20+len(payload)))
	p[8] = 64
	p[9] = 253
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	return append(p, payload...)
}

// testPlan is a checked Config of n members in the default subnet, with
// made-up peer IDs, as rank self sees it.
func testPlan(t testing.TB, n, self int) plan {
	t.Helper()
	var ms []Member
	for i := range n {
		ms = append(ms, Member{Rank: i, Peer: peer.ID(fmt.Sprintf("peer-%d", i))})
	}
	p, err := Config{Gang: "gang", Lease: fmt.Sprintf("lease%d", self), Self: self, Members: ms}.check(ms[self].Peer)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// packetPair is a SOCK_SEQPACKET pair: like a TUN device, each read and
// write on it is one whole packet. One end stands in for the device in a
// Net, the other for the part's kernel.
func packetPair(t testing.TB) (dev, part *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		// Room for a few full-sized packets each way.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	}
	dev, part = os.NewFile(uintptr(fds[0]), "dev"), os.NewFile(uintptr(fds[1]), "part")
	t.Cleanup(func() { part.Close() })
	return dev, part
}

// forwardingNet is a Net with no namespace and no host, over a packet pair:
// the forwarding alone. Its part's end is returned with it.
func forwardingNet(t testing.TB, p plan) (*Net, *os.File) {
	t.Helper()
	dev, part := packetPair(t)
	n := newNet(context.Background(), p, dev, namespace{}, nil, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n, part
}

// memStream is one end of an in-memory stream between two forwarding Nets.
type memStream struct {
	io.Reader
	io.Writer
	close func()
}

func (m *memStream) Reset() error { m.close(); return nil }

// memStreams returns two connected streams.
func memStreams() (a, b *memStream) {
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			ar.Close()
			br.Close()
			aw.Close()
			bw.Close()
		})
	}
	return &memStream{Reader: ar, Writer: aw, close: closeAll}, &memStream{Reader: br, Writer: bw, close: closeAll}
}

// eventually polls cond until it holds, failing after 30 s: long enough
// for a machine whose cores are all busy with other tests.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPacket reads one packet from a part's end, or fails after a while.
func readPacket(t testing.TB, part *os.File, within time.Duration) ([]byte, error) {
	t.Helper()
	_ = part.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, MTU)
	n, err := part.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
