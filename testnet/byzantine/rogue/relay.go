package rogue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	ma "github.com/multiformats/go-multiaddr"
)

// ProtoSink is a rogue's own protocol: it reads whatever comes and counts
// it (Sunk), so that what a relay carried between two rogues is measured
// where it arrived.
const ProtoSink = protocol.ID("/e31-rogue/sink/1")

// relayClient is the reachability of a rogue host that may use relays:
// the relay transport and the circuit v2 client on, nothing else (no
// AutoNAT, no hole punching), and its reachability left unknown, so that
// it reserves a slot only when an attack asks (ReserveSlot).
func relayClient(relays []string) (p2p.Reachability, error) {
	if len(relays) == 0 {
		return p2p.Reachability{}, nil
	}
	var infos []peer.AddrInfo
	for _, a := range relays {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			return p2p.Reachability{}, fmt.Errorf("rogue: relay %q: %w", a, err)
		}
		infos = append(infos, *ai)
	}
	return p2p.Reachability{RelayClient: true, StaticRelays: infos}, nil
}

// serveSink counts what comes on ProtoSink, by sender, until the sender
// closes the stream or the stream is cut.
func (r *Rogue) serveSink() {
	r.h.SetStreamHandler(ProtoSink, func(s network.Stream) {
		from := s.Conn().RemotePeer()
		r.mu.Lock()
		r.sinks++
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.sinks--
			r.mu.Unlock()
		}()
		_ = s.SetReadDeadline(time.Now().Add(2 * callTimeout))
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				r.mu.Lock()
				r.sunk[from] += int64(n)
				r.mu.Unlock()
			}
			if err != nil {
				_ = s.Reset()
				return
			}
		}
	})
}

// Sunk is how many bytes p sent the rogue on ProtoSink, and whether a sink
// stream is still open.
func (r *Rogue) Sunk(p peer.ID) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sunk[p], r.sinks > 0
}

// ReserveSlot asks relay (a multiaddr ending in /p2p/ID) for a slot, as
// a host behind a NAT does.
func (r *Rogue) ReserveSlot(ctx context.Context, relay string) error {
	return reserveOn(ctx, r.h, relay)
}

func reserveOn(ctx context.Context, h host.Host, relay string) error {
	ai, err := peer.AddrInfoFromString(relay)
	if err != nil {
		return fmt.Errorf("rogue: relay %q: %w", relay, err)
	}
	ctx, cancel := context.WithTimeout(ctx, client.ReserveTimeout+5*time.Second)
	defer cancel()
	_, err = client.Reserve(ctx, h, *ai)
	return err
}

// Via connects the rogue to p through relay alone, as a peer that no hole
// can be punched to would: first it drops its connections to p and the
// addresses it knows of p (on loopback it would dial them directly).
func (r *Rogue) Via(ctx context.Context, relay string, p peer.ID) error {
	return via(ctx, r.h, relay, p)
}

func via(ctx context.Context, h host.Host, relay string, p peer.ID) error {
	for _, c := range h.Network().ConnsToPeer(p) {
		_ = c.Close()
	}
	h.Peerstore().ClearAddrs(p)
	circuit, err := ma.NewMultiaddr(relay + "/p2p-circuit")
	if err != nil {
		return fmt.Errorf("rogue: relay %q: %w", relay, err)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return h.Connect(ctx, peer.AddrInfo{ID: p, Addrs: []ma.Multiaddr{circuit}})
}

// Push sends n bytes to p on ProtoSink over the rogue's relayed
// connection to p (Via), and returns how many its host took before the
// stream ended, with why it ended early. It dials nothing: a stream that
// would not go through the relay is an error.
func (r *Rogue) Push(ctx context.Context, p peer.ID, n int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s, err := r.h.NewStream(network.WithNoDial(ctx, "rogue push"), p, ProtoSink)
	if err != nil {
		return 0, fmt.Errorf("rogue: open a stream to %s: %w", p, err)
	}
	if !p2p.IsRelayed(s.Conn().RemoteMultiaddr()) {
		_ = s.Reset()
		return 0, fmt.Errorf("rogue: the stream to %s goes over %s, not a relay", p, s.Conn().RemoteMultiaddr())
	}
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetWriteDeadline(d)
	}
	buf := make([]byte, 64<<10)
	var sent int64
	for sent < n {
		w, err := s.Write(buf[:min(int64(len(buf)), n-sent)])
		sent += int64(w)
		if err != nil {
			_ = s.Reset()
			return sent, err
		}
	}
	return sent, s.Close()
}

// RelayOptions shape AbuseRelay.
type RelayOptions struct {
	// Relay is the relay attacked, a multiaddr ending in /p2p/ID: one of
	// the Config.Relays of the rogue and of Accomplice.
	Relay string
	// Accomplice is a second rogue on the same network, the member the
	// rogue opens its circuits to. Its offer is of Model.
	Accomplice *Rogue
	// Push is how many bytes go over the circuit between the two with no
	// lease; default 4 MiB.
	Push int64
	// Budget is the relay's byte budget per peer (e31d
	// --relay-budget-peer); 0: the lease's circuit is not pushed past
	// it. When set, 4 × Budget go over that circuit.
	Budget int64
	// Model is the GPU model of the accomplice's offer and of the job
	// the rogue declares for their lease; default "RELAY".
	Model string
}

func (o RelayOptions) withDefaults() RelayOptions {
	if o.Push <= 0 {
		o.Push = 4 << 20
	}
	if o.Model == "" {
		o.Model = "RELAY"
	}
	return o
}

// The steps of AbuseRelay.
const (
	StepStrangerSlot    = "stranger's reservation"
	StepStrangerCircuit = "stranger's circuit to a member"
	StepMemberSlot      = "member's reservation"
	StepUnleased        = "circuit to a member it holds no lease with"
	StepUnleasedPush    = "bytes pushed with no lease"
	StepLease           = "lease with that member"
	StepLeasePush       = "bytes pushed past the byte budget"
)

// AbuseRelay uses relay as anyone who can dial it would. A stranger (a
// fresh host that never joined the network's topics) asks for a slot and
// opens a circuit to a member. The rogue, a member once its offer is
// accepted, reserves a slot and pushes o.Push bytes over a circuit to the
// accomplice, with whom it holds no lease; then, with o.Budget set, it
// takes a lease with the accomplice (its own job, which only the
// accomplice's offer fits) and pushes 4 × o.Budget over a new circuit.
// Result.Bytes is what arrived with no lease; each push's step counts
// what arrived (Count). The rogue and the accomplice must be joined to
// the relay's network.
func (r *Rogue) AbuseRelay(ctx context.Context, o RelayOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackRelay}
	acc := o.Accomplice
	if acc == nil {
		return res, errors.New("rogue: relay abuse needs an accomplice")
	}

	// The stranger: a host of its own, which dials only the relay.
	stranger, err := strangerHost(o.Relay)
	if err != nil {
		return res, err
	}
	defer stranger.Close()
	type answered struct {
		step  Step
		after time.Duration
	}
	slot := make(chan answered, 1)
	go func() {
		start := time.Now()
		err := reserveOn(ctx, stranger, o.Relay)
		slot <- answered{relayStep(StepStrangerSlot, err), time.Since(start)}
	}()

	// Members: each is one once the relay accepts its offer.
	if err := r.Offer(ctx, r.GPUs(o.Model+"-IDLE", 1, 80<<30)); err != nil {
		return res, err
	}
	if err := acc.Offer(ctx, acc.GPUs(o.Model, 1, 80<<30)); err != nil {
		return res, err
	}
	if err := acc.ReserveSlot(ctx, o.Relay); err != nil {
		return res, fmt.Errorf("rogue: the accomplice's reservation: %w", err)
	}
	res.Steps = append(res.Steps, relayStep(StepStrangerCircuit, via(ctx, stranger, o.Relay, acc.ID())))
	err = r.ReserveSlot(ctx, o.Relay)
	res.Steps = append(res.Steps, relayStep(StepMemberSlot, err))

	// No lease: whatever the circuit carries is the relay's gift.
	step := relayStep(StepUnleased, r.Via(ctx, o.Relay, acc.ID()))
	res.Steps = append(res.Steps, step)
	if step.Answer == Accepted {
		got, s, err := r.pushTo(ctx, acc, StepUnleasedPush, o.Push)
		if err != nil {
			return res, err
		}
		res.Steps = append(res.Steps, s)
		res.Bytes = got
		res.note("%s of %s arrived with no lease", bytesText(got), bytesText(o.Push))
	}

	if o.Budget > 0 {
		if err := r.leaseWith(ctx, acc, o.Model); err != nil {
			res.Steps = append(res.Steps, stepOf(StepLease, err, Countersigned))
			return res, err
		}
		res.Steps = append(res.Steps, Step{What: StepLease, Answer: Countersigned})
		if err := r.Via(ctx, o.Relay, acc.ID()); err != nil {
			res.Steps = append(res.Steps, relayStep("circuit to its lease's party", err))
		} else {
			push := 4 * o.Budget
			got, s, err := r.pushTo(ctx, acc, StepLeasePush, push)
			if err != nil {
				return res, err
			}
			res.Steps = append(res.Steps, s)
			res.note("%s of %s arrived under the lease, against a budget of %s a peer", bytesText(got), bytesText(push), bytesText(o.Budget))
		}
	}

	select {
	case a := <-slot:
		res.Steps = append([]Step{a.step}, res.Steps...)
		res.Notes = append([]string{fmt.Sprintf("the stranger's reservation answered after %s", a.after.Round(100*time.Millisecond))}, res.Notes...)
	case <-ctx.Done():
		return res, fmt.Errorf("rogue: the stranger's reservation: %w", ctx.Err())
	}
	return res, nil
}

// pushTo pushes n bytes to acc over the relayed connection and waits for
// acc's sink to end; it returns what arrived and the step that says so.
func (r *Rogue) pushTo(ctx context.Context, acc *Rogue, what string, n int64) (int64, Step, error) {
	before, _ := acc.Sunk(r.self)
	sent, perr := r.Push(ctx, acc.ID(), n)
	if perr != nil && sent == 0 && !isReset(perr) {
		return 0, Step{}, perr // no stream: the harness, not the relay
	}
	// The sink ends when the relay cuts the circuit, or when the push
	// closed it.
	deadline := time.Now().Add(callTimeout)
	got := int64(0)
	for {
		total, open := acc.Sunk(r.self)
		got = total - before
		if !open && (perr != nil || got >= sent) {
			break
		}
		if time.Now().After(deadline) {
			return got, Step{}, fmt.Errorf("rogue: the accomplice's sink still open %s after the push", callTimeout)
		}
		if err := task.Sleep(ctx, 20*time.Millisecond); err != nil {
			return got, Step{}, err
		}
	}
	s := Step{What: what, Answer: Accepted, Count: int(got)}
	if perr != nil || got < n {
		s.Answer = Cut
		if perr != nil {
			s.Err = perr.Error()
		}
	}
	return got, s, nil
}

// leaseWith declares a job that only acc's offer fits and has acc propose
// for it: the rogue countersigns, and acc announces the lease, as a live
// lease's parties do.
func (r *Rogue) leaseWith(ctx context.Context, acc *Rogue, model string) error {
	r.Serve(SubmitterPolicy{Receipts: Countersign})
	d := market.NewDeclaration("relayed", []string{"true"}, 1, market.Duration((10 * time.Minute).Milliseconds()), nil)
	d.Request.GPUModel = model
	d.Request.Memory = 256 * market.MiB
	j, err := r.Declare(ctx, d, true)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	seen, err := acc.WaitJob(wctx, j.ID)
	if err != nil {
		return err
	}
	_, err = acc.Propose(ctx, seen, Terms{})
	return err
}

// strangerHost is a host with a fresh identity that may use relay, and
// knows of nothing else.
func strangerHost(relay string) (host.Host, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	reach, err := relayClient([]string{relay})
	if err != nil {
		return nil, err
	}
	return p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: "e31-stranger", Reachability: reach})
}

// relayStep names how a relay answered a request that returned err: a
// refusal's code is the relay's status (circuit v2), as
// PERMISSION_DENIED.
func relayStep(what string, err error) Step {
	if err == nil {
		return Step{What: what, Answer: Accepted}
	}
	return Step{What: what, Answer: Refused, Code: relayStatus(err), Err: err.Error()}
}

// relayStatus is the circuit v2 status a relay refused with, as err says
// it; "" if it says none.
func relayStatus(err error) string {
	var re client.ReservationError
	if errors.As(err, &re) {
		return re.Status.String()
	}
	for _, name := range pbv2.Status_name {
		if name != pbv2.Status_OK.String() && name != pbv2.Status_UNUSED.String() && strings.Contains(err.Error(), name) {
			return name
		}
	}
	return ""
}

// isReset reports whether err says a stream was reset under its writer.
func isReset(err error) bool {
	return errors.Is(err, network.ErrReset) || strings.Contains(err.Error(), "reset")
}
