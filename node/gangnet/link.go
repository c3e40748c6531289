package gangnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/libp2p/go-libp2p/core/peer"
)

// stream is what a link needs of a libp2p stream; tests of the forwarding
// give it an in-memory pipe.
type stream interface {
	io.Reader
	io.Writer
	Reset() error
}

// link is this part's tie to one other member: the stream that is up now,
// if any, and who that member is.
type link struct {
	// Immutable.
	n    *Net
	rank int
	peer peer.ID
	addr [4]byte

	// cur is the stream up now, nil while none is. The device reader
	// loads it for every packet, so it is an atomic rather than under mu;
	// attach stores it under Net.mu so that Close sees it.
	cur atomic.Pointer[conn]
}

// conn is one stream to a member, with its writer's queue. A conn never
// comes back once closed: the link gets a new one.
type conn struct {
	l     *link
	s     stream
	r     *bufio.Reader // reads s; it may hold what arrived with the handshake
	queue chan *[]byte  // frames for s; never closed, so a late enqueue cannot panic
	done  chan struct{} // closed by close
	once  sync.Once
}

// attach makes s the link's stream, replacing the one before it (whose
// peer dialled again: it has given it up), and starts its reader and
// writer. It reports false, and resets s, when the Net is closed.
func (n *Net) attach(l *link, s stream, r *bufio.Reader) (*conn, bool) {
	c := &conn{l: l, s: s, r: r, queue: make(chan *[]byte, queueLen), done: make(chan struct{})}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = s.Reset()
		return nil, false
	}
	old := l.cur.Swap(c)
	// Started under mu: Close marks the Net closed under mu before it
	// closes the task group, so these cannot be refused.
	n.tasks.Go(c.write)
	n.tasks.Go(c.read)
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	n.log.Info("gang stream up", "to_rank", l.rank, "peer", l.peer)
	n.notify()
	return c, true
}

// newReader is the buffered reader of a stream's frames.
func newReader(s io.Reader) *bufio.Reader { return bufio.NewReaderSize(s, bufSize) }

// enqueue hands a packet to the writer, or reports false when its queue is
// full.
func (c *conn) enqueue(bp *[]byte) bool {
	select {
	case c.queue <- bp:
		return true
	default:
		return false
	}
}

// close resets the stream and takes it off its link.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.s.Reset()
		if c.l.cur.CompareAndSwap(c, nil) {
			c.l.n.notify()
		}
	})
}

// fail closes c for err, which a reset by either side or Close explains.
func (c *conn) fail(err error) {
	select {
	case <-c.done:
	default:
		n := c.l.n
		n.log.Info("gang stream down", "to_rank", c.l.rank, "peer", c.l.peer, "err", err)
	}
	c.close()
}

// write sends the queued frames, flushing whenever the queue runs dry:
// small packets that queue up while a write is under way leave together.
func (c *conn) write() {
	n := c.l.n
	w := bufio.NewWriterSize(c.s, bufSize)
	for {
		var bp *[]byte
		select {
		case <-c.done:
			return
		case bp = <-c.queue:
		}
		frame := *bp
		var err error
		if len(frame) >= directWrite {
			// Big enough to be its own write: copying it into w first
			// would only cost a memmove of up to 64 KiB.
			if w.Buffered() > 0 {
				err = w.Flush()
			}
			if err == nil {
				_, err = c.s.Write(frame)
			}
		} else {
			_, err = w.Write(frame)
		}
		n.release(bp)
		if err == nil && len(c.queue) == 0 {
			err = w.Flush()
		}
		if err != nil {
			c.fail(err)
			return
		}
		n.count.outPackets.Add(1)
		n.count.outBytes.Add(uint64(len(frame) - frameHeader))
	}
}

// read delivers what arrives on the stream into the part's device, from
// the reader's buffer: the device's write copies it into the kernel.
func (c *conn) read() {
	for {
		pkt, err := readFrame(c.r, MTU)
		if err != nil {
			c.fail(err)
			return
		}
		if !c.l.n.deliver(c.l, pkt) {
			c.close()
			return
		}
	}
}

// errRefused is a dial that the other daemon answered with a refusal.
type errRefused byte

func (e errRefused) Error() string {
	switch byte(e) {
	case replyNoGang:
		return "the gang is not open there (yet)"
	case replyRefused:
		return "refused: not the member named for this rank"
	}
	return fmt.Sprintf("refused with code %d", byte(e))
}

// keep dials the link's member, and dials again whenever the stream ends,
// with backoff, until the Net closes or Open's context ends. Only the
// lower rank dials: each pair has one stream, and neither side has to
// decide between two.
func (l *link) keep() {
	n := l.n
	backoff := minBackoff
	for n.ctx.Err() == nil {
		start := time.Now()
		c, err := l.dial()
		if err == nil {
			select {
			case <-c.done:
			case <-n.ctx.Done():
				return
			}
			// A stream that held for a while earns a quick redial; one
			// that broke at once keeps backing off.
			if time.Since(start) > maxBackoff {
				backoff = minBackoff
			}
			err = errors.New("stream ended")
		}
		n.log.Debug("gang dial", "to_rank", l.rank, "peer", l.peer, "err", err, "retry", backoff)
		if task.Sleep(n.ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// dial opens a stream to the link's member and attaches it once the member
// accepts the hello. It uses a direct connection, or a relayed one whose
// relay sets no limit: libp2p refuses limited connections to a stream
// unless asked, and packets are bulk data.
func (l *link) dial() (*conn, error) {
	n := l.n
	ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
	defer cancel()
	s, err := n.reg.h.NewStream(ctx, l.peer, Protocol)
	if err != nil {
		return nil, err
	}
	_ = s.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := s.Write(hello{Gang: n.plan.Gang, From: n.plan.Self, To: l.rank}.marshal()); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("send hello: %w", err)
	}
	var code [1]byte
	if _, err := io.ReadFull(s, code[:]); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if code[0] != replyOK {
		_ = s.Reset()
		return nil, errRefused(code[0])
	}
	_ = s.SetDeadline(time.Time{})
	c, ok := n.attach(l, s, newReader(s))
	if !ok {
		return nil, ErrClosed
	}
	return c, nil
}

// admit decides whether a stream whose hello h arrived from peer may be
// the link to h.From, and returns that link. The lower rank dials, and the
// peer must be the one named for that rank: a daemon cannot speak for a
// part it does not run.
func (n *Net) admit(h hello, from peer.ID) (*link, bool) {
	if h.To != n.plan.Self || h.From < 0 || h.From >= n.plan.Self {
		return nil, false
	}
	l := n.links[h.From]
	if l.peer != from {
		return nil, false
	}
	return l, true
}
