package epoch

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// delayLine is a TCP proxy on 127.0.0.1 that holds every byte for a fixed
// one-way latency in each direction, without limiting how much is in
// flight: a long, fat link. mocknet's LinkOptions.Latency is no substitute:
// a mocknet stream hands over its next write only once the previous one
// has arrived, so a gossip stream carries one message per latency and its
// queue, not the latency, sets the delay (measured here: 150ms links gave
// gossip delays over 400ms at a few messages a second).
type delayLine struct {
	ln      net.Listener
	target  string
	latency time.Duration
	wg      sync.WaitGroup
	mu      sync.Mutex // guards conns
	conns   []net.Conn
}

// newDelayLine listens on a free loopback port and forwards to target.
func newDelayLine(ctx context.Context, target string, latency time.Duration) (*delayLine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &delayLine{ln: ln, target: target, latency: latency}
	d.wg.Go(func() { d.serve(ctx) })
	return d, nil
}

// Port is where the line listens.
func (d *delayLine) Port() int { return d.ln.Addr().(*net.TCPAddr).Port }

// Close stops listening, cuts the connections and waits for their
// goroutines.
func (d *delayLine) Close() {
	d.ln.Close()
	d.mu.Lock()
	for _, c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

func (d *delayLine) serve(ctx context.Context) {
	for {
		in, err := d.ln.Accept()
		if err != nil {
			return
		}
		var dialer net.Dialer
		out, err := dialer.DialContext(ctx, "tcp", d.target)
		if err != nil {
			in.Close()
			continue
		}
		d.mu.Lock()
		d.conns = append(d.conns, in, out)
		d.mu.Unlock()
		d.wg.Go(func() { d.carry(in, out) })
		d.wg.Go(func() { d.carry(out, in) })
	}
}

// chunk is bytes read from one side, due at the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// carry copies src to dst, each read delivered latency after it was read.
// Reading never waits for writing, so the link's capacity is not the
// latency's hostage.
func (d *delayLine) carry(src, dst net.Conn) {
	q := make(chan chunk, 4096)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(d.latency)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				src.Close()
			}
			break
		}
	}
	close(q)
	wg.Wait()
}
