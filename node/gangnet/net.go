package gangnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
)

// Interface is the name of the gang network's interface in each part's
// namespace.
const Interface = "e31g0"

// MTU is the interface's MTU: the most a TUN device takes, and the most an
// IPv4 packet can be. The kernel's TCP inside sends segments of up to
// 64 KiB, so the daemon handles one packet per 64 KiB read and write rather
// than one per 1.5 KiB, which is most of what makes the path fast.
const MTU = 65535

// ErrClosed is returned by Ready once the Net is closed.
var ErrClosed = errors.New("gang network closed")

// Forwarding tunables.
const (
	// queueLen bounds the packets waiting for a member's stream: 64 full
	// packets are 4 MiB, which absorbs a burst; beyond it the packet is
	// dropped as a router would, and TCP inside backs off.
	queueLen = 64
	// bufSize is the buffered reader's and writer's size on each stream:
	// small packets (ACKs, requests) that arrive together leave in one
	// write. The reader's must hold a whole frame.
	bufSize = 256 << 10
	// directWrite is the size from which a frame goes to the stream in a
	// write of its own rather than through the buffered writer.
	directWrite = 16 << 10
	// handshakeTimeout bounds a hello and its reply.
	handshakeTimeout = 10 * time.Second
	// dialTimeout bounds one attempt to open a stream to a member.
	dialTimeout = 30 * time.Second
	// Dial backoff: the first retry after minBackoff, doubling to maxBackoff.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// closeWait bounds how long Close waits for the Net's goroutines.
	closeWait = 10 * time.Second
)

// Net is one part's end of a gang network: the namespace and its TUN
// device, and a stream to each other member. Open makes it; Close takes it
// all down.
type Net struct {
	// Immutable after Open.
	plan  plan
	reg   *Registry // nil in tests of the forwarding alone
	dev   *os.File  // the TUN device, or a stand-in that keeps packet boundaries
	ns    namespace // zero in tests of the forwarding alone
	log   *slog.Logger
	links []*link // by rank; nil at Self
	// ctx ends at Close, or when Open's context ends: it bounds dialling.
	ctx    context.Context
	cancel context.CancelFunc
	tasks  task.Group
	pool   sync.Pool // *[]byte of frameHeader+MTU bytes: a frame, room for its length first
	count  counters

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a link goes up or down; guarded by mu
	closed  bool          // guarded by mu

	closeOnce sync.Once
	closeErr  error
}

// newNet builds a Net around dev, a packet device, and starts reading it.
// Open calls it with the TUN device; tests of the forwarding call it with
// one end of a SOCK_SEQPACKET pair, which keeps packet boundaries too.
func newNet(ctx context.Context, p plan, dev *os.File, ns namespace, reg *Registry, log *slog.Logger) *Net {
	n := &Net{plan: p, reg: reg, dev: dev, ns: ns, log: log, changed: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(ctx)
	n.pool.New = func() any { b := make([]byte, frameHeader+MTU); return &b }
	n.tasks.OnPanic = func(v any, stack []byte) {
		log.Error("gang network goroutine panicked", "panic", v, "stack", string(stack))
	}
	n.links = make([]*link, len(p.Members))
	for i, m := range p.Members {
		if i != p.Self {
			n.links[i] = &link{n: n, rank: i, peer: m.Peer, addr: p.addrs[i]}
		}
	}
	n.tasks.Go(n.readDevice)
	return n
}

// NetNSPath is the path of the part's network namespace, for the OCI
// spec's network namespace entry.
func (n *Net) NetNSPath() string { return n.ns.path }

// SysfsPath is a read-only sysfs mounted from inside the part's network
// namespace, so that its /sys/class/net shows lo and Interface. A sandbox
// in a user namespace binds it at /sys (type "bind", options "bind", "ro",
// "nosuid", "nodev", "noexec") instead of mounting a sysfs: the kernel lets
// a process mount a sysfs only if its user namespace owns its network
// namespace, and the daemon's owns this one, so runc's sysfs mount fails
// there with EPERM. A sandbox in no user namespace may mount its own.
func (n *Net) SysfsPath() string { return n.ns.sys }

// Interface is the name of the part's interface in its namespace.
func (n *Net) Interface() string { return Interface }

// Addr is rank's address on the gang network; the zero Addr for a rank
// that is not a member.
func (n *Net) Addr(rank int) netip.Addr {
	if rank < 0 || rank >= len(n.plan.addrs) {
		return netip.Addr{}
	}
	return netip.AddrFrom4(n.plan.addrs[rank])
}

// Prefix is this part's address with the subnet's length, as its interface
// holds it.
func (n *Net) Prefix() netip.Prefix { return n.plan.prefix(n.plan.Self) }

// Stats counts what the Net forwarded and dropped.
func (n *Net) Stats() Stats {
	s := n.count.snapshot()
	for _, l := range n.links {
		if l != nil && l.cur.Load() != nil {
			s.Links++
		}
	}
	return s
}

// Ready waits until a stream to every other member is up: a gang's run
// starts only then, so that no part's first connection is dropped for want
// of a link. It returns ErrClosed if the Net closes first, and ctx's error,
// naming the members still missing, if ctx ends first.
func (n *Net) Ready(ctx context.Context) error {
	for {
		n.mu.Lock()
		changed, closed := n.changed, n.closed
		n.mu.Unlock()
		if closed {
			return ErrClosed
		}
		var missing []int
		for _, l := range n.links {
			if l != nil && l.cur.Load() == nil {
				missing = append(missing, l.rank)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gang %s: no stream yet to ranks %v: %w", n.plan.Gang, missing, ctx.Err())
		case <-changed:
		}
	}
}

// notify wakes whoever waits in Ready.
func (n *Net) notify() {
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// Close ends the streams, closes the TUN device and removes the namespace.
// It may be called more than once; later calls return the first's result.
func (n *Net) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Net) close() error {
	if n.reg != nil {
		n.reg.forget(n)
	}
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.tasks.Close()
	for _, l := range n.links {
		if l != nil {
			if c := l.cur.Load(); c != nil {
				c.close()
			}
		}
	}
	var errs []error
	if err := n.dev.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close %s: %w", Interface, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := n.tasks.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("gang %s: goroutines still running after %s", n.plan.Gang, closeWait))
	}
	n.notify()
	// The namespace goes last: the TUN device's file held it, and the
	// sandbox's processes may still.
	if n.ns != (namespace{}) {
		if err := removeNamespace(n.ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readDevice forwards what the part sends: each packet read from the
// device goes to the stream of the member it is for, if the rules allow.
func (n *Net) readDevice() {
	for {
		bp := n.pool.Get().(*[]byte)
		m, err := n.dev.Read((*bp)[frameHeader : frameHeader+MTU])
		if err != nil {
			n.pool.Put(bp)
			if !errors.Is(err, os.ErrClosed) {
				n.log.Error("gang network device read failed", "err", err)
			}
			return
		}
		*bp = (*bp)[:frameHeader+m]
		binary.BigEndian.PutUint16(*bp, uint16(m))
		c, why := n.route((*bp)[frameHeader:])
		if why == "" && !c.enqueue(bp) {
			why = DropQueueFull
		}
		if why != "" {
			n.count.drop(why)
			n.release(bp)
		}
	}
}

// route decides where a packet from the part goes: the stream of the
// member it is for, or a reason to drop it. The part may send only from
// its own address, and only to another member's.
func (n *Net) route(pkt []byte) (*conn, DropReason) {
	src, dst, ok := ipv4(pkt)
	switch {
	case !ok:
		return nil, DropNotIPv4
	case src != n.plan.addrs[n.plan.Self]:
		return nil, DropSpoofed
	}
	r := n.plan.rankOf(dst)
	if r < 0 || r == n.plan.Self {
		return nil, DropNotMember
	}
	c := n.links[r].cur.Load()
	if c == nil {
		return nil, DropNoLink
	}
	return c, ""
}

// deliver writes a packet that arrived on l's stream into the part's
// device, if the rules allow: it must come from l's member's address, for
// this part's. It reports false when the device is gone.
func (n *Net) deliver(l *link, pkt []byte) bool {
	src, dst, ok := ipv4(pkt)
	var why DropReason
	switch {
	case !ok:
		why = DropNotIPv4
	case src != l.addr:
		why = DropWrongSource
	case dst != n.plan.addrs[n.plan.Self]:
		why = DropWrongDest
	}
	if why != "" {
		n.count.drop(why)
		return true
	}
	if _, err := n.dev.Write(pkt); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return false
		}
		// The kernel refuses a packet it cannot take (a bad checksum
		// is not among them: it drops those itself, silently).
		n.count.drop(DropTunWrite)
		return true
	}
	n.count.inPackets.Add(1)
	n.count.inBytes.Add(uint64(len(pkt)))
	return true
}

// release returns a frame's buffer to the pool.
func (n *Net) release(bp *[]byte) {
	*bp = (*bp)[:cap(*bp)]
	n.pool.Put(bp)
}
