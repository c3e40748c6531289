package gangnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// The gang network against what it is built on, measured in one run on
// the same two hosts: TCP through the gang network between the two parts'
// namespaces against a raw libp2p stream between their daemons, and a
// one-byte TCP request and reply against libp2p's ping. Goals: gang
// throughput at least half the raw stream's; gang round trip at most
// twice ping's.

const benchChunk = 1 << 20

// sinkProtocol is a test protocol that reads until EOF and answers one
// byte: the raw stream's side of BenchmarkThroughput.
const sinkProtocol = protocol.ID("/e31/gangnet-bench-sink/1")

// sinkTCP serves what sinkProtocol does, over TCP in rank's namespace.
func sinkTCP(b *testing.B, n *Net, rank int) string {
	b.Helper()
	var l net.Listener
	err := inNamespace(n.NetNSPath(), func() (err error) {
		l, err = net.Listen("tcp4", n.Addr(rank).String()+":0")
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go sink(c)
		}
	}()
	return l.Addr().String()
}

func sink(rw io.ReadWriteCloser) {
	defer rw.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := rw.Read(buf); err != nil {
			break
		}
	}
	_, _ = rw.Write([]byte{1})
}

// pour writes b.N chunks to w, half-closes it with closeWrite, and waits
// for the sink's byte: everything has arrived.
func pour(b *testing.B, rw io.ReadWriter, closeWrite func() error) {
	chunk := make([]byte, benchChunk)
	b.SetBytes(benchChunk)
	b.ResetTimer()
	for range b.N {
		if _, err := rw.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := closeWrite(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(rw, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

func BenchmarkThroughput(b *testing.B) {
	g := newGang(b, 2)
	a, c := g.nets[0], g.nets[1]
	b.Run("gang", func(b *testing.B) {
		addr := sinkTCP(b, a, 0)
		conn, err := dialTCP(c, addr, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		pour(b, conn, conn.(*net.TCPConn).CloseWrite)
	})
	b.Run("raw", func(b *testing.B) {
		g.hosts[0].SetStreamHandler(sinkProtocol, func(s network.Stream) { sink(s) })
		defer g.hosts[0].RemoveStreamHandler(sinkProtocol)
		s, err := g.hosts[1].NewStream(context.Background(), g.hosts[0].ID(), sinkProtocol)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		pour(b, s, s.CloseWrite)
	})
}

func BenchmarkRTT(b *testing.B) {
	g := newGang(b, 2)
	a, c := g.nets[0], g.nets[1]
	b.Run("gang", func(b *testing.B) {
		conn, err := dialTCP(c, echoTCP(b, a, 0).String(), 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		one := []byte{7}
		got := make([]byte, 1)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if _, err := conn.Write(one); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, got); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/rtt")
	})
	b.Run("libp2p-ping", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// One stream, one 32-byte ping after another, each timed.
		results := ping.Ping(ctx, g.hosts[1], g.hosts[0].ID())
		if r := <-results; r.Error != nil { // the stream's opening, not timed
			b.Fatal(r.Error)
		}
		b.ResetTimer()
		var sum time.Duration
		for range b.N {
			r := <-results
			if r.Error != nil {
				b.Fatal(r.Error)
			}
			sum += r.RTT
		}
		// ping times each round trip itself; ns/op adds the hand-over
		// of each result to this goroutine.
		b.ReportMetric(float64(sum.Microseconds())/float64(b.N), "µs/rtt")
	})
}
