package gangnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
)

// Protocol is the libp2p protocol of the streams between the daemons of a
// gang's parts.
const Protocol = "/e31/gang/1.0.0"

// ErrGangOpen is returned by Open for a gang that already has a Net open on
// this registry.
var ErrGangOpen = errors.New("gang network already open here")

// Registry serves Protocol on a host and hands each incoming stream to the
// open Net of the gang its hello names. A daemon has one.
type Registry struct {
	// Immutable.
	h   host.Host
	log *slog.Logger

	mu sync.Mutex
	// nets holds the open Nets by gang; a nil entry reserves a gang whose
	// Open is under way. Guarded by mu.
	nets   map[string]*Net
	closed bool // guarded by mu
}

// NewRegistry serves Protocol on h. A nil log discards.
func NewRegistry(h host.Host, log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{h: h, log: log, nets: map[string]*Net{}}
	h.SetStreamHandler(Protocol, r.handle)
	return r
}

// Close stops serving Protocol and closes every Net still open.
func (r *Registry) Close() error {
	r.h.RemoveStreamHandler(Protocol)
	r.mu.Lock()
	r.closed = true
	var open []*Net
	for _, n := range r.nets {
		if n != nil {
			open = append(open, n)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, n := range open {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// Open makes this part's end of a gang network: the namespace
// e31-<cfg.Lease> with lo and the TUN device Interface holding the part's
// address, a goroutine that forwards what the part sends, and a stream to
// every other member. It dials the members of higher rank itself, again
// and again with backoff whenever a stream is down, until ctx ends or the
// Net is closed, so pass the lease's context; the members of lower rank
// dial it. The host must be able to find each member's addresses (its
// peerstore, or routing).
//
// Open returns once the namespace is up, not the streams: Ready waits for
// those. It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), which a provider
// that runs runc has.
func (r *Registry) Open(ctx context.Context, cfg Config) (*Net, error) {
	p, err := cfg.check(r.h.ID())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	switch _, taken := r.nets[p.Gang]; {
	case r.closed:
		r.mu.Unlock()
		return nil, fmt.Errorf("open gang %s: registry closed", p.Gang)
	case taken:
		r.mu.Unlock()
		return nil, fmt.Errorf("open gang %s: %w", p.Gang, ErrGangOpen)
	}
	r.nets[p.Gang] = nil
	r.mu.Unlock()

	ns, dev, err := createNamespace(namespaceName(p.Lease), p.prefix(p.Self))
	if err != nil {
		r.mu.Lock()
		delete(r.nets, p.Gang)
		r.mu.Unlock()
		return nil, fmt.Errorf("open gang %s: %w", p.Gang, err)
	}
	n := newNet(ctx, p, dev, ns, r, r.log.With("gang", p.Gang, "rank", p.Self))
	r.mu.Lock()
	if r.closed {
		delete(r.nets, p.Gang)
		r.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("open gang %s: registry closed", p.Gang), n.Close())
	}
	r.nets[p.Gang] = n
	r.mu.Unlock()
	for _, l := range n.links[p.Self+1:] {
		n.tasks.Go(l.keep)
	}
	return n, nil
}

// forget drops n from the registry, so that its gang's streams are
// answered replyNoGang from now on.
func (r *Registry) forget(n *Net) {
	r.mu.Lock()
	if cur, ok := r.nets[n.plan.Gang]; ok && cur == n {
		delete(r.nets, n.plan.Gang)
	}
	r.mu.Unlock()
}

// handle answers a stream that a member's daemon opened. libp2p runs it in
// a goroutine of its own without recovering; the decoders are fuzzed, and
// a panic that gets past them fails only this stream.
func (r *Registry) handle(s network.Stream) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("gang stream handler panicked", "peer", s.Conn().RemotePeer(), "panic", v, "stack", string(debug.Stack()))
			_ = s.Reset()
		}
	}()
	from := s.Conn().RemotePeer()
	_ = s.SetDeadline(time.Now().Add(handshakeTimeout))
	// The hello is read straight from the stream, which holds nothing
	// beyond it until the reply goes: the big reader is made only for a
	// stream that is admitted.
	h, err := readHello(s)
	if err != nil {
		r.log.Debug("bad gang hello", "peer", from, "err", err)
		_ = s.Reset()
		return
	}
	r.mu.Lock()
	n := r.nets[h.Gang]
	r.mu.Unlock()
	if n == nil {
		answer(s, replyNoGang)
		return
	}
	l, ok := n.admit(h, from)
	if !ok {
		n.count.refused.Add(1)
		// Counted, and logged at debug only: a peer must not be able to
		// fill the daemon's log.
		n.log.Debug("gang stream refused", "peer", from, "from_rank", h.From, "to_rank", h.To)
		answer(s, replyRefused)
		return
	}
	if _, err := s.Write([]byte{replyOK}); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.SetDeadline(time.Time{})
	n.attach(l, s, newReader(s))
}

// answer sends a refusal and closes the stream, so that the dialer reads
// the code before it sees the end.
func answer(s network.Stream, code byte) {
	if _, err := s.Write([]byte{code}); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}
