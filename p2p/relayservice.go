package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/util"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// PanicRelay is the where of a panic recovered from the relay service's
// handling of one request (RelayLimits.Panicked).
const PanicRelay = "relay"

// Protocol constants of circuit relay v2, as go-libp2p's relay has them.
const (
	relayStreamTimeout    = time.Minute
	relayConnectTimeout   = 30 * time.Second
	relayHandshakeTimeout = time.Minute
	relayMaxMessage       = 4096
	relayReservationTag   = "relay-reservation"
	relayHopTag           = "relay-v2-hop"
)

// dataCharge is how many bytes a data circuit carries between two charges
// to its budgets: each charge takes a lock every circuit shares, and a
// budget may be overrun by this much per circuit.
const dataCharge = 64 << 10

// pairPoll is how often a circuit waiting for its lease (awaitPaired) asks
// again.
const pairPoll = 50 * time.Millisecond

// pairedCheck is how long a member circuit trusts the gate's answer that
// its ends are paired: a lease's release takes effect on its bytes within
// this.
const pairedCheck = time.Second

// serveRelay runs a circuit relay v2 service on h within l while h is
// public (as go-libp2p's relay manager does for its own relay), until h
// closes. Its decisions are relayGate's; its protocol is go-libp2p's
// relay's, whose reservation and splicing it follows step for step, so
// that every libp2p client is served unchanged.
func serveRelay(h host.Host, l RelayLimits) error {
	sub, err := h.EventBus().Subscribe(new(event.EvtLocalReachabilityChanged), eventbus.Name("e31-relay"))
	if err != nil {
		return fmt.Errorf("relay service: watch reachability: %w", err)
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var mt relay.MetricsTracer
	if l.Metrics != nil {
		mt = relay.NewMetricsTracer(relay.WithRegisterer(l.Metrics))
	}
	gate := newRelayGate(l, newRelayStats(l.Metrics))
	rc := l.resources()
	allow := l.allowance()
	go func() {
		defer sub.Close()
		var svc *relayService
		defer func() {
			if svc != nil {
				svc.close()
			}
		}()
		for {
			select {
			case <-hostDone(h):
				return
			case ev, ok := <-sub.Out():
				if !ok {
					return
				}
				public := ev.(event.EvtLocalReachabilityChanged).Reachability == network.ReachabilityPublic
				switch {
				case public && svc == nil:
					s, err := newRelayService(h, rc, allow, gate, mt, log, l.Panicked)
					if err != nil {
						log.Warn("relay service did not start", "err", err)
						continue
					}
					svc = s
				case !public && svc != nil:
					svc.close()
					svc = nil
				}
			}
		}
	}()
	return nil
}

// hostDone is closed when h's network closes; nil (never) for a network
// that does not say.
func hostDone(h host.Host) <-chan struct{} {
	if d, ok := h.Network().(interface{ Done() <-chan struct{} }); ok {
		return d.Done()
	}
	return nil
}

// relayService is a circuit relay v2 hop service: it holds slots for
// peers behind NATs and splices the circuits other peers open to them,
// each as its gate decides.
type relayService struct {
	// Immutable after newRelayService.
	host     host.Host
	rc       relay.Resources
	allow    relay.RelayLimit // what a circuit carries while it carries no data
	gate     *relayGate
	mt       relay.MetricsTracer // nil: no libp2p_relaysvc_* series
	log      *slog.Logger
	panicked func(where string) // nil: panics are only logged
	ctx      context.Context    // ends with close
	cancel   context.CancelFunc
	scope    network.ResourceScopeSpan
	notifiee network.Notifiee

	mu sync.Mutex // guards the fields below; memory only
	// rsvp holds each slot: when it expires and the address prefix its
	// peer reserved from.
	rsvp   map[peer.ID]slot
	conns  map[peer.ID]int // open circuits by end
	closed bool
}

type slot struct {
	expire time.Time
	prefix string
}

func newRelayService(h host.Host, rc relay.Resources, allow relay.RelayLimit, gate *relayGate, mt relay.MetricsTracer, log *slog.Logger, panicked func(string)) (*relayService, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &relayService{host: h, rc: rc, allow: allow, gate: gate, mt: mt, log: log, panicked: panicked, ctx: ctx, cancel: cancel,
		rsvp: make(map[peer.ID]slot), conns: make(map[peer.ID]int)}
	err := h.Network().ResourceManager().ViewService(relay.ServiceName, func(s network.ServiceScope) error {
		var err error
		r.scope, err = s.BeginSpan()
		return err
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("relay service scope: %w", err)
	}
	h.SetStreamHandler(proto.ProtoIDv2Hop, r.handleStream)
	r.notifiee = &network.NotifyBundle{DisconnectedF: r.disconnected}
	h.Network().Notify(r.notifiee)
	if mt != nil {
		mt.RelayStatus(true)
	}
	go r.background()
	return r, nil
}

func (r *relayService) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.host.RemoveStreamHandler(proto.ProtoIDv2Hop)
	r.host.Network().StopNotify(r.notifiee)
	r.cancel()
	r.gc()
	r.scope.Done()
	if r.mt != nil {
		r.mt.RelayStatus(false)
	}
}

// handleStream answers one hop request. What a peer sends must never end
// the daemon: a panic fails this request only.
func (r *relayService) handleStream(s network.Stream) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("panic recovered", "where", PanicRelay, "panic", fmt.Sprint(v), "peer", s.Conn().RemotePeer(), "stack", string(debug.Stack()))
			if r.panicked != nil {
				r.panicked(PanicRelay)
			}
			_ = s.Reset()
		}
	}()
	if err := s.Scope().SetService(relay.ServiceName); err != nil {
		_ = s.Reset()
		return
	}
	if err := s.Scope().ReserveMemory(relayMaxMessage, network.ReservationPriorityAlways); err != nil {
		_ = s.Reset()
		return
	}
	defer s.Scope().ReleaseMemory(relayMaxMessage)
	_ = s.SetReadDeadline(time.Now().Add(relayStreamTimeout))
	msg, err := readHop(s)
	if err != nil {
		r.gate.stats.circuitsRefused.WithLabelValues(relayMalformed).Inc()
		r.respond(s, pbv2.Status_MALFORMED_MESSAGE, nil, nil)
		return
	}
	_ = s.SetReadDeadline(time.Time{})
	switch msg.GetType() {
	case pbv2.HopMessage_RESERVE:
		status := r.handleReserve(s)
		if r.mt != nil {
			r.mt.ReservationRequestHandled(status)
		}
	case pbv2.HopMessage_CONNECT:
		status := r.handleConnect(s, msg)
		if r.mt != nil {
			r.mt.ConnectionRequestHandled(status)
		}
	default:
		r.gate.stats.circuitsRefused.WithLabelValues(relayMalformed).Inc()
		r.respond(s, pbv2.Status_MALFORMED_MESSAGE, nil, nil)
	}
}

// errHopRequest: a hop message that is neither a reservation nor a
// circuit to a peer.
var errHopRequest = errors.New("hop request is neither a reservation nor a connect to a peer")

// readHop reads one hop request: a RESERVE, or a CONNECT that names a
// peer. It decodes what any peer sends, and is fuzzed (FuzzReadHop).
func readHop(rd io.Reader) (*pbv2.HopMessage, error) {
	dr := util.NewDelimitedReader(rd, relayMaxMessage)
	defer dr.Close()
	var msg pbv2.HopMessage
	if err := dr.ReadMsg(&msg); err != nil {
		return nil, fmt.Errorf("read hop request: %w", err)
	}
	switch msg.GetType() {
	case pbv2.HopMessage_RESERVE:
	case pbv2.HopMessage_CONNECT:
		if _, err := util.PeerToPeerInfoV2(msg.GetPeer()); err != nil {
			return nil, fmt.Errorf("%w: %v", errHopRequest, err)
		}
	default:
		return nil, errHopRequest
	}
	return &msg, nil
}

func (r *relayService) refuseReserve(s network.Stream, status pbv2.Status, reason string) pbv2.Status {
	r.gate.stats.reservationsRefused.WithLabelValues(reason).Inc()
	r.log.Debug("relay slot refused", "peer", s.Conn().RemotePeer(), "addr", s.Conn().RemoteMultiaddr(), "reason", reason)
	r.respond(s, status, nil, nil)
	return status
}

func (r *relayService) handleReserve(s network.Stream) pbv2.Status {
	defer s.Close()
	p, a := s.Conn().RemotePeer(), s.Conn().RemoteMultiaddr()
	if IsRelayed(a) {
		return r.refuseReserve(s, pbv2.Status_PERMISSION_DENIED, relayOverRelay)
	}
	if ok, why := r.gate.reserve(r.ctx, p, a); !ok {
		return r.refuseReserve(s, pbv2.Status_PERMISSION_DENIED, why)
	}
	prefix := r.gate.prefix(a)
	now := time.Now()
	expire := now.Add(r.rc.ReservationTTL)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.refuseReserve(s, pbv2.Status_PERMISSION_DENIED, relayFull)
	}
	_, renewal := r.rsvp[p]
	held, fromPrefix := 0, 0
	for q, sl := range r.rsvp {
		if q == p || sl.expire.Before(now) {
			continue
		}
		held++
		if sl.prefix == prefix {
			fromPrefix++
		}
	}
	switch {
	case held >= r.rc.MaxReservations:
		r.mu.Unlock()
		return r.refuseReserve(s, pbv2.Status_RESERVATION_REFUSED, relayFull)
	case fromPrefix >= r.rc.MaxReservationsPerIP:
		r.mu.Unlock()
		return r.refuseReserve(s, pbv2.Status_RESERVATION_REFUSED, relayCrowded)
	}
	r.rsvp[p] = slot{expire: expire, prefix: prefix}
	r.host.ConnManager().TagPeer(p, relayReservationTag, relay.ReservationTagWeight)
	r.mu.Unlock()
	if r.mt != nil {
		r.mt.ReservationAllowed(renewal)
	}
	r.log.Debug("relay slot reserved", "peer", p, "renewal", renewal)
	rsvp := r.reservation(p, expire)
	if err := r.write(s, pbv2.Status_OK, rsvp, r.reservationLimit()); err != nil {
		_ = s.Reset() // the slot stays until gc: the peer may ask again
		return pbv2.Status_CONNECTION_FAILED
	}
	return pbv2.Status_OK
}

// reservation is the answer to a reservation: the relay's public
// addresses and a voucher it signs.
func (r *relayService) reservation(p peer.ID, expire time.Time) *pbv2.Reservation {
	exp := uint64(expire.Unix())
	rsvp := &pbv2.Reservation{Expire: &exp}
	self := r.host.ID()
	selfP2P, err := ma.NewComponent("p2p", self.String())
	if err != nil {
		return rsvp
	}
	for _, a := range r.host.Addrs() {
		if !manet.IsPublicAddr(a) {
			continue
		}
		switch id, _ := peer.IDFromP2PAddr(a); id {
		case "":
			a = a.Encapsulate(selfP2P)
		case self:
		default:
			continue
		}
		rsvp.Addrs = append(rsvp.Addrs, a.Bytes())
	}
	env, err := record.Seal(&proto.ReservationVoucher{Relay: self, Peer: p, Expiration: expire}, r.host.Peerstore().PrivKey(self))
	if err != nil {
		return rsvp
	}
	if blob, err := env.Marshal(); err == nil {
		rsvp.Voucher = blob
	}
	return rsvp
}

// reservationLimit is the limit a reservation announces: none on a relay
// that carries data, whose circuits between members are unmarked.
func (r *relayService) reservationLimit() *pbv2.Limit {
	if r.gate.data {
		return nil
	}
	return r.limitMsg()
}

// limitMsg is the limit of a limited circuit, as its ends are told it.
func (r *relayService) limitMsg() *pbv2.Limit {
	d, n := uint32(r.allow.Duration/time.Second), uint64(r.allow.Data)
	return &pbv2.Limit{Duration: &d, Data: &n}
}

func (r *relayService) refuseConnect(s network.Stream, status pbv2.Status, reason string, dest peer.ID) pbv2.Status {
	r.gate.stats.circuitsRefused.WithLabelValues(reason).Inc()
	r.log.Debug("relay circuit refused", "src", s.Conn().RemotePeer(), "dest", dest, "reason", reason)
	r.respond(s, status, nil, nil)
	return status
}

func (r *relayService) handleConnect(s network.Stream, msg *pbv2.HopMessage) pbv2.Status {
	src, a := s.Conn().RemotePeer(), s.Conn().RemoteMultiaddr()
	span, err := r.scope.BeginSpan()
	if err != nil {
		r.respond(s, pbv2.Status_RESOURCE_LIMIT_EXCEEDED, nil, nil)
		return pbv2.Status_RESOURCE_LIMIT_EXCEEDED
	}
	done := false
	defer func() {
		if !done {
			span.Done()
		}
	}()
	if err := span.ReserveMemory(2*r.rc.BufferSize, network.ReservationPriorityHigh); err != nil {
		r.respond(s, pbv2.Status_RESOURCE_LIMIT_EXCEEDED, nil, nil)
		return pbv2.Status_RESOURCE_LIMIT_EXCEEDED
	}
	dest, _ := util.PeerToPeerInfoV2(msg.GetPeer()) // readHop checked it
	if IsRelayed(a) {
		return r.refuseConnect(s, pbv2.Status_PERMISSION_DENIED, relayOverRelay, dest.ID)
	}
	r.mu.Lock()
	sl, ok := r.rsvp[dest.ID]
	r.mu.Unlock()
	if !ok {
		return r.refuseConnect(s, pbv2.Status_NO_RESERVATION, relayNoSlot, dest.ID)
	}
	class, keys, why := r.gate.circuit(src, r.gate.prefix(a), dest.ID, sl.prefix)
	if class == 0 {
		return r.refuseConnect(s, pbv2.Status_PERMISSION_DENIED, why, dest.ID)
	}
	r.mu.Lock()
	if _, ok := r.rsvp[dest.ID]; !ok {
		r.mu.Unlock()
		return r.refuseConnect(s, pbv2.Status_NO_RESERVATION, relayNoSlot, dest.ID)
	}
	if r.conns[src] >= r.rc.MaxCircuits || r.conns[dest.ID] >= r.rc.MaxCircuits {
		r.mu.Unlock()
		return r.refuseConnect(s, pbv2.Status_RESOURCE_LIMIT_EXCEEDED, relayCircuits, dest.ID)
	}
	r.addConn(src)
	r.addConn(dest.ID)
	r.mu.Unlock()
	if r.mt != nil {
		r.mt.ConnectionOpened()
	}
	opened := time.Now()
	var cleaned atomic.Bool
	cleanup := func() {
		if cleaned.Swap(true) {
			return
		}
		span.Done()
		r.mu.Lock()
		r.rmConn(src)
		r.rmConn(dest.ID)
		r.mu.Unlock()
		if r.mt != nil {
			r.mt.ConnectionClosed(time.Since(opened))
		}
	}
	done = true // cleanup ends the span from here on

	ctx, cancel := context.WithTimeout(r.ctx, relayConnectTimeout)
	defer cancel()
	bs, err := r.host.NewStream(network.WithNoDial(ctx, "relay connect"), dest.ID, proto.ProtoIDv2Stop)
	if err != nil {
		cleanup()
		r.respond(s, pbv2.Status_CONNECTION_FAILED, nil, nil)
		return pbv2.Status_CONNECTION_FAILED
	}
	fail := func(status pbv2.Status) pbv2.Status {
		_ = bs.Reset()
		cleanup()
		r.respond(s, status, nil, nil)
		return status
	}
	if err := bs.Scope().SetService(relay.ServiceName); err != nil {
		return fail(pbv2.Status_RESOURCE_LIMIT_EXCEEDED)
	}
	if err := bs.Scope().ReserveMemory(relayMaxMessage, network.ReservationPriorityAlways); err != nil {
		return fail(pbv2.Status_RESOURCE_LIMIT_EXCEEDED)
	}
	defer bs.Scope().ReleaseMemory(relayMaxMessage)

	var limit *pbv2.Limit
	if class == circuitLimited {
		limit = r.limitMsg()
	}
	_ = bs.SetDeadline(time.Now().Add(relayHandshakeTimeout))
	stop := pbv2.StopMessage{Type: pbv2.StopMessage_CONNECT.Enum(), Peer: util.PeerInfoToPeerV2(peer.AddrInfo{ID: src}), Limit: limit}
	if err := util.NewDelimitedWriter(bs).WriteMsg(&stop); err != nil {
		return fail(pbv2.Status_CONNECTION_FAILED)
	}
	var answer pbv2.StopMessage
	rd := util.NewDelimitedReader(bs, relayMaxMessage)
	err = rd.ReadMsg(&answer)
	rd.Close()
	if err != nil || answer.GetType() != pbv2.StopMessage_STATUS || answer.GetStatus() != pbv2.Status_OK {
		return fail(pbv2.Status_CONNECTION_FAILED)
	}
	if err := r.write(s, pbv2.Status_OK, nil, limit); err != nil {
		_ = bs.Reset()
		_ = s.Reset()
		cleanup()
		return pbv2.Status_CONNECTION_FAILED
	}
	_ = bs.SetDeadline(time.Time{})
	r.log.Debug("relaying", "src", src, "dest", dest.ID, "limited", class == circuitLimited)

	c := &circuit{r: r, src: src, dest: dest.ID, a: s, b: bs, cleanup: cleanup}
	if class == circuitLimited {
		c.spliceLimited()
	} else {
		c.keys = keys
		c.spliceMember()
	}
	return pbv2.Status_OK
}

func (r *relayService) addConn(p peer.ID) {
	r.conns[p]++
	if r.conns[p] == 1 {
		r.host.ConnManager().TagPeer(p, relayHopTag, 2)
	}
}

func (r *relayService) rmConn(p peer.ID) {
	if r.conns[p]--; r.conns[p] > 0 {
		return
	}
	delete(r.conns, p)
	r.host.ConnManager().UntagPeer(p, relayHopTag)
}

func (r *relayService) respond(s network.Stream, status pbv2.Status, rsvp *pbv2.Reservation, limit *pbv2.Limit) {
	if err := r.write(s, status, rsvp, limit); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

func (r *relayService) write(s network.Stream, status pbv2.Status, rsvp *pbv2.Reservation, limit *pbv2.Limit) error {
	_ = s.SetWriteDeadline(time.Now().Add(relayStreamTimeout))
	defer s.SetWriteDeadline(time.Time{})
	msg := pbv2.HopMessage{Type: pbv2.HopMessage_STATUS.Enum(), Status: status.Enum(), Reservation: rsvp, Limit: limit}
	return util.NewDelimitedWriter(s).WriteMsg(&msg)
}

func (r *relayService) background() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.gc()
		case <-r.ctx.Done():
			return
		}
	}
}

// gc drops the slots that expired, or every slot once closed.
func (r *relayService) gc() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	n := 0
	for p, sl := range r.rsvp {
		if r.closed || sl.expire.Before(now) {
			delete(r.rsvp, p)
			r.host.ConnManager().UntagPeer(p, relayReservationTag)
			n++
		}
	}
	if r.mt != nil {
		r.mt.ReservationClosed(n)
	}
}

// disconnected drops the slot of a peer no longer connected: its
// reservation lives on its connection.
func (r *relayService) disconnected(n network.Network, c network.Conn) {
	p := c.RemotePeer()
	if n.Connectedness(p) == network.Connected {
		return
	}
	r.mu.Lock()
	_, ok := r.rsvp[p]
	delete(r.rsvp, p)
	r.mu.Unlock()
	if ok && r.mt != nil {
		r.mt.ReservationClosed(1)
	}
}
